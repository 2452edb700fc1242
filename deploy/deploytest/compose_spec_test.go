package deploytest

import (
	"maps"
	"slices"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// The compose file loads with compose-go, the Compose specification's own loader (the one docker compose
// uses): it is validated against the specification's schema, and the project it gives has the cluster's
// services, each with the dependencies, healthchecks and secrets the strict decode in TestCompose reads.
// The two readings agreeing is what makes TestCompose's checks checks of what Compose will run.
func TestComposeLoadsWithComposeGo(t *testing.T) {
	t.Parallel()
	details, err := loader.LoadConfigFiles(t.Context(), []string{composePath}, "../docker")
	if err != nil {
		t.Fatal(err)
	}
	project, err := loader.LoadWithContext(t.Context(), *details, func(o *loader.Options) {
		o.SetProjectName("flashgate", true)
	})
	if err != nil {
		t.Fatalf("compose-go refuses deploy/docker/compose.yaml: %v", err)
	}
	if got, want := slices.Sorted(maps.Keys(project.Services)), sortedKeys(composeShape); !slices.Equal(got, want) {
		t.Fatalf("compose-go reads services %v, want the cluster's shape %v", got, want)
	}
	strict := readCompose(t)
	for name, s := range project.Services {
		mine := strict.Services[name]
		if got, want := slices.Sorted(maps.Keys(s.DependsOn)), sortedKeys(mine.DependsOn); !slices.Equal(got, want) {
			t.Errorf("service %s: compose-go reads depends_on %v, the strict decode %v", name, got, want)
		}
		for dep, d := range s.DependsOn {
			if d.Condition != mine.DependsOn[dep].Condition {
				t.Errorf("service %s: depends_on %s: condition %q, the strict decode %q", name, dep, d.Condition, mine.DependsOn[dep].Condition)
			}
			if d.Condition == types.ServiceConditionHealthy && project.Services[dep].HealthCheck == nil {
				t.Errorf("service %s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep)
			}
		}
		var secrets []string
		for _, sec := range s.Secrets {
			secrets = append(secrets, sec.Source)
		}
		if !slices.Equal(secrets, mine.Secrets) {
			t.Errorf("service %s: compose-go reads secrets %v, the strict decode %v", name, secrets, mine.Secrets)
		}
		if s.ReadOnly != mine.ReadOnly {
			t.Errorf("service %s: read_only %v, the strict decode %v", name, s.ReadOnly, mine.ReadOnly)
		}
		if len(s.Ports) != len(mine.Ports) {
			t.Errorf("service %s: compose-go reads %d ports, the strict decode %d", name, len(s.Ports), len(mine.Ports))
		}
		for _, p := range s.Ports {
			if p.HostIP != "127.0.0.1" {
				t.Errorf("service %s: port %s published on %q, want 127.0.0.1", name, p.Published, p.HostIP)
			}
		}
	}
	for name, sec := range project.Secrets {
		if sec.Environment == "" && sec.File == "" {
			t.Errorf("secret %s: neither environment nor file", name)
		}
	}
}
