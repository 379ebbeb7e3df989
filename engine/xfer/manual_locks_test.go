package xfer

import (
	"errors"
	"testing"
	"time"
)

// returnsWithin runs fn and fails the test if it has not returned within d
// (a deadlock); it does not wait for a stuck fn.
func returnsWithin(t *testing.T, d time.Duration, what string, fn func()) bool {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		t.Errorf("%s: still blocked after %v (deadlock)", what, d)
		return false
	}
}

// TestManualOnInboundRunsWithoutLocks: Options.OnInbound is called without
// locks held, so a consumer's hook may read the network (Pending), post a
// reply WRITE or close its own agent, whichever network step or Close ends
// the inbound transfer.
func TestManualOnInboundRunsWithoutLocks(t *testing.T) {
	hooks := []string{"Pending", "Post", "Close"}
	steps := map[string]func(net *ManualNetwork, req *Request, prod, cons Agent){
		"Deliver":         func(net *ManualNetwork, req *Request, _, _ Agent) { _ = net.Deliver(req) },
		"Cut":             func(net *ManualNetwork, req *Request, _, _ Agent) { _ = net.Cut(req) },
		"Complete":        func(net *ManualNetwork, req *Request, _, _ Agent) { _ = net.Complete(req) },
		"initiator Close": func(_ *ManualNetwork, _ *Request, prod, _ Agent) { _ = prod.Close() },
		"target Close":    func(_ *ManualNetwork, _ *Request, _, cons Agent) { _ = cons.Close() },
	}
	for _, hook := range hooks {
		for step, run := range steps {
			t.Run(hook+" at "+step, func(t *testing.T) {
				net := NewManualNetwork()
				var cons Agent
				var reply *Request
				called := 0
				var err error
				cons, err = NewManual(net, Options{Name: "consumer", OnInbound: func(InboundEvent) {
					called++
					switch hook {
					case "Pending":
						_ = net.Pending()
					case "Post":
						_, _ = cons.Post(reply)
					case "Close":
						_ = cons.Close()
					}
				}})
				must0(t, err)
				prod, err := NewManual(net, Options{Name: "producer"})
				must0(t, err)
				md, _ := cons.LocalMetadata()
				pmd, _ := prod.LocalMetadata()
				s := register(t, prod, randomBytes(1, 64))
				d := register(t, cons, filled(64, canary))
				s2 := register(t, cons, randomBytes(2, 64))
				d2 := register(t, prod, filled(64, canary))
				reply, err = cons.CreateWriteTo(s2.Descriptors, pmd, d2.Descriptors)
				must0(t, err)
				req, err := prod.CreateWriteTo(s.Descriptors, md, d.Descriptors)
				must0(t, err)
				if _, err := prod.Post(req); err != nil {
					t.Fatal(err)
				}
				if !returnsWithin(t, 2*time.Second, step+" with an OnInbound calling "+hook, func() { run(net, req, prod, cons) }) {
					return
				}
				if called != 1 {
					t.Errorf("OnInbound called %d times; want 1", called)
				}
			})
		}
	}
}

// probe is a manual transport that runs between in the window of hold
// between the target's accepting a transfer and the network's recording it
// (if set), and reports when its agent's Close has run abandon and close
// (each scans the network's pending transfers).
type probe struct {
	*manual
	between           func()
	abandoned, closed chan struct{}
}

func newProbe(a Agent) *probe {
	c := a.(*core)
	p := &probe{manual: c.tr.(*manual), abandoned: make(chan struct{}), closed: make(chan struct{})}
	c.tr = p
	return p
}

func (p *probe) hold(r *Request, w outbound) {
	t := p.accept(w)
	if p.between != nil {
		p.between()
	}
	p.record(r, t)
}

func (p *probe) abandon() { p.manual.abandon(); close(p.abandoned) }

func (p *probe) close() error {
	err := p.manual.close()
	close(p.closed)
	return err
}

// TestManualCloseDuringPost: an agent closed while a Post is between the
// target's accepting the transfer and the network's recording it (its
// Close scanned the pending transfers too early) still ends the transfer
// at once: closing the initiator fails it with ErrCanceled and releases
// the target's region (a Revoke is done); closing the target cuts it. In
// neither case does Close wait for the driver.
func TestManualCloseDuringPost(t *testing.T) {
	for _, side := range []string{"initiator", "target"} {
		t.Run(side, func(t *testing.T) {
			net := NewManualNetwork()
			cons, err := NewManual(net, Options{Name: "consumer"})
			must0(t, err)
			prod, err := NewManual(net, Options{Name: "producer"})
			must0(t, err)
			pp, cp := newProbe(prod), newProbe(cons)
			closing, scanned := prod, pp.abandoned
			if side == "target" {
				closing, scanned = cons, cp.closed
			}
			closeDone := make(chan error, 1)
			pp.between = func() {
				go func() { closeDone <- closing.Close() }()
				<-scanned
			}
			md, _ := cons.LocalMetadata()
			s := register(t, prod, randomBytes(1, 64))
			d := register(t, cons, filled(64, canary))
			req, err := prod.CreateWriteTo(s.Descriptors, md, d.Descriptors)
			must0(t, err)
			if _, err := prod.Post(req); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-closeDone:
				must0(t, err)
			case <-time.After(2 * time.Second):
				t.Errorf("%s Close still blocked 2s after Post returned; Pending=%d", side, net.Pending())
				_ = net.Complete(req)
				<-closeDone
				return
			}
			if side == "initiator" {
				if _, err := prod.Status(req); !errors.Is(err, ErrCanceled) {
					t.Errorf("Status after the initiator's Close = %v; want ErrCanceled", err)
				}
				if n := net.Pending(); n != 0 {
					t.Errorf("Pending = %d after the initiator's Close; want 0", n)
				}
				done, err := cons.Revoke(d)
				must0(t, err)
				select {
				case <-done:
				default:
					t.Error("Revoke of the target region not done: the cancelled transfer still holds it")
				}
			} else if err := net.Complete(req); !errors.Is(err, ErrRemoteDisconnect) {
				t.Errorf("Complete after the target's Close = %v; want ErrRemoteDisconnect", err)
			}
		})
	}
}

// TestManualNilNetwork: a nil *ManualNetwork answers ErrInvalidParam (and
// Pending 0) instead of panicking.
func TestManualNilNetwork(t *testing.T) {
	var n *ManualNetwork
	for name, step := range map[string]func(*Request) error{"Deliver": n.Deliver, "Cut": n.Cut, "Complete": n.Complete} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("(*ManualNetwork)(nil).%s(nil) panicked: %v", name, r)
				}
			}()
			if err := step(nil); !errors.Is(err, ErrInvalidParam) {
				t.Errorf("(*ManualNetwork)(nil).%s(nil) = %v; want ErrInvalidParam", name, err)
			}
		}()
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("(*ManualNetwork)(nil).Pending() panicked: %v", r)
			}
		}()
		if got := n.Pending(); got != 0 {
			t.Errorf("(*ManualNetwork)(nil).Pending() = %d; want 0", got)
		}
	}()
}
