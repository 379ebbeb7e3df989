package shareddir

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// TestSingleUseGoroutineRace: SU-1 for every entry, of N goroutines claiming
// it and the producer removing it at the same moment, exactly one wins; every
// loser gets ErrGone (a consumer) or removed=false (the producer).
func TestSingleUseGoroutineRace(t *testing.T) {
	d, root := newProducer(t)
	const entries, claimers = 60, 6
	wins := map[string]int{}
	for e := 0; e < entries; e++ {
		id := newEntryID(t)
		if _, err := d.Write(id, tinyOutput(2, 2, e), nil); err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		results := make(chan string, claimers+1)
		var wg sync.WaitGroup
		for c := 0; c < claimers; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _, err := Claim(OSFS{}, root, testInstanceID, id, rand.Reader, 1<<20)
				switch {
				case err == nil:
					results <- "consumer"
				case errors.Is(err, ErrGone):
					results <- "lost"
				default:
					results <- "error: " + err.Error()
				}
			}()
		}
		withRemove := e%3 != 0 // some rounds are consumers only
		if withRemove {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				removed, err := d.Remove(id)
				switch {
				case err != nil:
					results <- "error: " + err.Error()
				case removed:
					results <- "producer"
				default:
					results <- "lost"
				}
			}()
		}
		close(start)
		wg.Wait()
		close(results)
		winners := 0
		for r := range results {
			switch r {
			case "consumer", "producer":
				winners++
				wins[r]++
			case "lost":
			default:
				t.Fatalf("entry %d: %s", e, r)
			}
		}
		if winners != 1 {
			t.Fatalf("SU-1 entry %d: %d winners among %d claimers (remove racing: %v), want exactly 1", e, winners, claimers, withRemove)
		}
	}
	t.Logf("winners over %d entries: %v", entries, wins)
	if names := dirNames(t, d.Path()); len(names) != len(instanceBaseFiles) {
		t.Errorf("after the race the instance dir holds %q, want only hmac.key and lock", names)
	}
}

// Environment of the claimer child process (TestClaimerChildProcess).
const (
	envChild    = "BATON_SHAREDDIR_CLAIMER_CHILD"
	envRoot     = "BATON_SHAREDDIR_ROOT"
	envInstance = "BATON_SHAREDDIR_INSTANCE"
)

// TestClaimerChildProcess is not a test: it is the body of a consumer process
// started by TestSingleUseProcessRace (re-exec of the test binary with
// envChild=1). It prints READY, then for each line "CLAIM <entryID>" on stdin
// claims the entry and prints "RESULT <entryID> won <sum>", "RESULT <entryID>
// gone" or "RESULT <entryID> error <text>".
func TestClaimerChildProcess(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("only runs as the child process of TestSingleUseProcessRace")
	}
	root, instance := os.Getenv(envRoot), os.Getenv(envInstance)
	fmt.Println("READY")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		id, ok := strings.CutPrefix(in.Text(), "CLAIM ")
		if !ok {
			continue
		}
		ts, _, err := Claim(OSFS{}, root, instance, id, rand.Reader, 1<<20)
		switch {
		case err == nil:
			vals, ferr := ts[0].Float32s()
			if ferr != nil {
				fmt.Printf("RESULT %s error %v\n", id, ferr)
				continue
			}
			var sum float64
			for _, v := range vals {
				sum += float64(v)
			}
			fmt.Printf("RESULT %s won %g\n", id, sum)
		case errors.Is(err, ErrGone):
			fmt.Printf("RESULT %s gone\n", id)
		default:
			fmt.Printf("RESULT %s error %s\n", id, strings.ReplaceAll(err.Error(), "\n", " | "))
		}
	}
}

// claimerProc is one consumer child process.
type claimerProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // "RESULT ..." lines from stdout
}

func startClaimer(t *testing.T, root string) *claimerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimerChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"=1", envRoot+"="+root, envInstance+"="+testInstanceID)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start claimer child %s: %v", os.Args[0], err)
	}
	p := &claimerProc{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); l == "READY" || strings.HasPrefix(l, "RESULT ") {
				p.lines <- l
			}
		}
	}()
	if l, ok := <-p.lines; !ok || l != "READY" {
		t.Fatalf("claimer child did not get ready (got %q)", l)
	}
	return p
}

func (p *claimerProc) next(t *testing.T) string {
	t.Helper()
	l, ok := <-p.lines
	if !ok {
		t.Fatal("claimer child exited early")
	}
	return l
}

// TestSingleUseProcessRace: SU-1 across processes. Two consumer processes
// (re-execs of this test binary) are told to claim the same entry at the same
// moment, while this process (the producer) removes it in every other round;
// in each of 50 rounds exactly one party wins, and the winner read the
// entry's data.
func TestSingleUseProcessRace(t *testing.T) {
	if os.Getenv(envChild) == "1" {
		t.Skip("inside a child")
	}
	d, root := newProducer(t)
	a, b := startClaimer(t, root), startClaimer(t, root)
	defer func() {
		a.stdin.Close()
		b.stdin.Close()
		for _, p := range []*claimerProc{a, b} {
			if err := p.cmd.Wait(); err != nil {
				t.Errorf("claimer child: %v", err)
			}
		}
	}()
	const rounds = 50
	wins := map[string]int{}
	for r := 0; r < rounds; r++ {
		id := newEntryID(t)
		ts := tinyOutput(4, 4, r)
		vals, _ := ts[0].Float32s()
		var sum float64
		for _, v := range vals {
			sum += float64(v)
		}
		if _, err := d.Write(id, ts, nil); err != nil {
			t.Fatal(err)
		}
		msg := "CLAIM " + id + "\n"
		if _, err := io.WriteString(a.stdin, msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(b.stdin, msg); err != nil {
			t.Fatal(err)
		}
		producerWon := false
		if r%2 == 0 {
			removed, err := d.Remove(id)
			if err != nil {
				t.Fatalf("round %d: Remove = %v", r, err)
			}
			producerWon = removed
		}
		winners := 0
		if producerWon {
			winners++
			wins["producer"]++
		}
		for name, p := range map[string]*claimerProc{"consumer A": a, "consumer B": b} {
			l := p.next(t)
			switch {
			case l == fmt.Sprintf("RESULT %s won %g", id, sum):
				winners++
				wins[name]++
			case l == "RESULT "+id+" gone":
			default:
				t.Fatalf("round %d: %s said %q, want won %g or gone", r, name, l, sum)
			}
		}
		if winners != 1 {
			t.Fatalf("SU-1 round %d: %d winners (producer removed: %v), want exactly 1", r, winners, producerWon)
		}
		if ok, err := d.Exists(id); ok || err != nil {
			t.Fatalf("round %d: entry still published after the race (%v)", r, err)
		}
	}
	t.Logf("winners over %d rounds: %v", rounds, wins)
}
