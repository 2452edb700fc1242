package line

// The scripts, for tests that call them with arguments of their choosing.
var (
	JoinScript     = joinScript
	RaiseScript    = raiseScript
	SealScript     = sealScript
	SettingsScript = settingsScript
)
