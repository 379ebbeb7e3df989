package sim

import (
	"fmt"
	"strings"
)

// partition is the scenario command `partition pd=N ms=MS`: consumer pd's
// link to E is cut for MS virtual ms from now (partition.go).
func (sc *Scenario) partition(b *strings.Builder, args map[string]string, num func(string, int64) (int64, error), consumer func() (int, error)) error {
	pd, err := consumer()
	if err != nil {
		return err
	}
	ms, err := num("ms", -1)
	if err != nil || ms < 1 {
		return fmt.Errorf("partition needs ms=N (N >= 1)")
	}
	sc.w.note = ""
	sc.w.Partition(pd, ms)
	fmt.Fprintf(b, "%s\n", sc.w.note)
	return nil
}
