// Package local_test tests the local stack's scripts against a real
// origin.
package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flashgate/flashgate/internal/httpread/httpreadtest"
	"github.com/flashgate/flashgate/internal/testenv"
	"github.com/flashgate/flashgate/origin/origintest"
)

// On a database that holds demo sales of earlier runs, long ended,
// demosale.sh creates a new demo sale that opens within seconds, as
// `make run` needs for a newcomer's demo to work.
func TestDemoSaleOpensOnADatabaseWithAnEndedOne(t *testing.T) {
	t.Parallel()
	o := origintest.StartOrigin(t, origintest.NewEnv(t))
	admin := "http://" + httpreadtest.Serve(t, o.App.AdminServer())
	public := "http://" + httpreadtest.Serve(t, o.App.PublicServer())

	// What `make run` left on earlier days: the fixed id it used, and one
	// named after its time.
	now := time.Now().UTC()
	for _, id := range []string{"demo", "demo-" + now.Add(-48*time.Hour).Format("20060102-150405")} {
		createSale(t, admin, id, now.Add(-50*time.Hour), now.Add(-40*time.Hour))
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "demosale.sh", admin, public)
	cmd.Env = append(cmd.Environ(), "FLASHGATE_ORIGIN_ADMIN_TOKEN="+origintest.AdminToken, "FLASHGATE_DEMO_STARTS_IN=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("demosale.sh = %v; stderr:\n%s", err, stderr.String())
	}
	id := strings.TrimSpace(stdout.String())
	t.Logf("demosale.sh printed %q; stderr:\n%s", id, stderr.String())

	testenv.Eventually(t, 15*time.Second, fmt.Sprintf("sale %q printed by demosale.sh open", id), func() bool {
		status := saleStatus(t, public, id)
		if status == "ended" {
			t.Fatalf("sale %q printed by demosale.sh is %q, want open", id, status)
		}
		return status == "open"
	})
}

func createSale(t *testing.T, admin, id string, startsAt, endsAt time.Time) {
	t.Helper()
	body := fmt.Sprintf(`{"sale_id":%q,"name":"Demo sneaker drop","starts_at":%q,"ends_at":%q,"skus":[{"sku":"sneaker-42","name":"Sneaker size 42","price_minor":499900,"currency":"INR","stock":500}]}`,
		id, startsAt.Format(time.RFC3339), endsAt.Format(time.RFC3339))
	req, err := http.NewRequest(http.MethodPost, admin+"/admin/sales", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+origintest.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /admin/sales %s: %v", id, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST /admin/sales %s = %d, want 201", id, res.StatusCode)
	}
}

// saleStatus is the origin snapshot's status of sale, or what went wrong.
func saleStatus(t *testing.T, public, sale string) string {
	t.Helper()
	res, err := http.Get(public + "/v1/sales/" + sale)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	var s struct {
		Status string `json:"status"`
	}
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil || res.StatusCode != http.StatusOK {
		return fmt.Sprintf("HTTP %d (%v)", res.StatusCode, err)
	}
	return s.Status
}
