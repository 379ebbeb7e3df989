package xfer

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// childEnv makes the test binary run as the consumer process of
// TestTCPAcrossProcesses instead of running tests.
const childEnv = "BATON_XFER_TEST_CHILD"

// childRegionBytes is the size of the child's receive region: not a round
// number, so chunking edges are exercised.
const childRegionBytes = 3<<20 + 17

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "consumer" {
		os.Exit(runConsumerChild())
	}
	os.Exit(m.Run())
}

// runConsumerChild: register one region, print metadata and descriptor,
// wait for one inbound write, then for the parent to close stdin (its write
// completed, so the acknowledgement has left), and print the write's
// outcome, the region's SHA-256 and whether Deregister succeeded.
func runConsumerChild() int {
	events := make(chan InboundEvent, 4)
	cons, err := NewTCP(TCPOptions{Options: Options{Name: "child-consumer", OnInbound: func(ev InboundEvent) { events <- ev }}})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	defer cons.Close()
	buf := filled(childRegionBytes, canary)
	reg, err := cons.RegisterMemory([][]byte{buf})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	md, _ := cons.LocalMetadata()
	d := reg.Descriptors[0]
	fmt.Printf("READY %x %d %d %x\n", md, d.Address, d.Length, d.RemoteKey)
	var ev InboundEvent
	select {
	case ev = <-events:
	case <-time.After(testTimeout):
		fmt.Println("ERROR no inbound write")
		return 1
	}
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	sum := sha256.Sum256(buf)
	derr := cons.Deregister(reg)
	fmt.Printf("DONE outcome=%d landed=%d sha=%x deregister=%v registrations=%d\n",
		ev.Outcome, ev.Landed, sum, derr, cons.Counters().Registrations)
	return 0
}

// TestTCPAcrossProcesses: a producer in this process writes into a consumer
// agent in another process (this test binary re-executed) over real
// loopback sockets; the consumer's region ends byte-identical to the source
// and the consumer can deregister it once the producer saw StatusDone.
func TestTCPAcrossProcesses(t *testing.T) {
	seed := testSeed(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=consumer")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<20)
	next := func() []string {
		if !lines.Scan() {
			t.Fatalf("child ended early: %v", lines.Err())
		}
		f := strings.Fields(lines.Text())
		if len(f) == 0 || f[0] == "ERROR" {
			t.Fatalf("child: %s", lines.Text())
		}
		return f
	}
	ready := next()
	if ready[0] != "READY" || len(ready) != 5 {
		t.Fatalf("child said %q", ready)
	}
	md, err := hex.DecodeString(ready[1])
	if err != nil {
		t.Fatal(err)
	}
	var remote Descriptor
	remote.MemoryKind = MemoryHost
	fmt.Sscan(ready[2], &remote.Address)
	fmt.Sscan(ready[3], &remote.Length)
	if remote.RemoteKey, err = hex.DecodeString(ready[4]); err != nil {
		t.Fatal(err)
	}

	prod, err := NewTCP(TCPOptions{Options: Options{Name: "parent-producer"}})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	peer, err := prod.LoadRemoteMetadata(md)
	if err != nil || peer != "child-consumer" {
		t.Fatalf("LoadRemoteMetadata = %q, %v", peer, err)
	}
	src := randomBytes(seed, childRegionBytes)
	preg := register(t, prod, src)
	if err := write(t, prod, preg.Descriptors, peer, []Descriptor{remote}); err != nil {
		t.Fatalf("write across processes = %v", err)
	}
	stdin.Close()
	done := strings.Join(next(), " ")
	want := fmt.Sprintf("DONE outcome=%d landed=%d sha=%x deregister=<nil> registrations=0",
		InboundLanded, childRegionBytes, sha256.Sum256(src))
	if done != want {
		t.Fatalf("child reported\n  %s\nwant\n  %s", done, want)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child exit: %v", err)
	}
	if err := prod.Deregister(preg); err != nil {
		t.Fatal(err)
	}
}
