//go:build race

package server

// raceEnabled: a test whose cost the race detector multiplies past its
// budget (HPACK of a 16 MiB header) is skipped under it; a smaller test
// covers the same decision there.
const raceEnabled = true
