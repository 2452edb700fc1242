package line

// The origin's durable copy changes in four ways, written here once as
// what they do to a Row: the origin's SQL (origin/internal/ledger/lines.go)
// does the same, and the stand-ins of the origin in tests use these.

// WithSettings is r after a settings change: what c names set, the
// version bumped, and no serving raise taken at the new version yet.
func (r Row) WithSettings(c Change) Row {
	if c.RatePerSecond != nil {
		r.RatePerSecond = *c.RatePerSecond
	}
	if c.Paused != nil {
		r.Paused = *c.Paused
	}
	if c.ChallengeBits != nil {
		r.ChallengeBits = *c.ChallengeBits
	}
	switch {
	case c.Autotune != nil:
		r.Autotune = *c.Autotune
	case c.RatePerSecond != nil:
		r.Autotune = false // a rate set by hand
	}
	if c.AutotuneMin != nil && c.AutotuneMax != nil {
		r.AutotuneMin, r.AutotuneMax = *c.AutotuneMin, *c.AutotuneMax
	}
	r.SettingsVersion++
	r.ServingRaised = 0
	return r
}

// Raised is r after a raise: each join ceiling at least c's, and the
// serving ceiling at least c.Serving if c was sized at r's settings
// version, which then also remembers it as taken at that version.
func (r Row) Raised(c Ceilings) Row {
	r.PreCeiling, r.PostCeiling = max(r.PreCeiling, c.Pre), max(r.PostCeiling, c.Post)
	if c.Serving > 0 && c.SettingsVersion == r.SettingsVersion {
		r.ServingCeiling, r.ServingRaised = max(r.ServingCeiling, c.Serving), max(r.ServingRaised, c.Serving)
	}
	return r
}

// Lowered is r after a report that Redis held serving ceiling ceiling at
// settings version version: at r's version the serving ceiling comes down
// to it, but never below a raise taken at that version (its Redis part may
// land after the reading), nor does it rise.
func (r Row) Lowered(version, ceiling int64) Row {
	if version == r.SettingsVersion {
		r.ServingCeiling = min(r.ServingCeiling, max(ceiling, r.ServingRaised))
	}
	return r
}

// settings are r's admission settings, as Redis takes them.
func (r Row) settings() Settings {
	return Settings{RatePerSecond: r.RatePerSecond, Paused: r.Paused, ChallengeBits: r.ChallengeBits, Version: r.SettingsVersion}
}
