package faultproxy

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestFaultKinds: each fault gives the caller the result a real network
// would, and the record says whether the request took effect upstream
// (CONTRACT Q-1: a lost reply after the request took effect).
func TestFaultKinds(t *testing.T) {
	const deadline = 300 * time.Millisecond
	cases := []struct {
		name          string
		step          Step
		payload       string
		deadline      time.Duration
		wantCode      codes.Code
		wantReply     string
		wantHandled   int64 // upstream requests that took effect
		wantForwarded bool
		wantReached   bool
		wantUpstream  codes.Code // when wantReached
		minElapsed    time.Duration
	}{
		{name: "none", step: Step{}, payload: "a", deadline: testWait, wantCode: codes.OK, wantReply: "echo:a",
			wantHandled: 1, wantForwarded: true, wantReached: true, wantUpstream: codes.OK},
		{name: "drop-request", step: Step{Fault: FaultDropRequest}, payload: "a", deadline: deadline,
			wantCode: codes.DeadlineExceeded, minElapsed: deadline},
		{name: "drop-reply", step: Step{Fault: FaultDropReply}, payload: "a", deadline: deadline,
			wantCode: codes.DeadlineExceeded, wantHandled: 1, wantForwarded: true, wantReached: true,
			wantUpstream: codes.OK, minElapsed: deadline},
		{name: "drop-reply-of-rejection", step: Step{Fault: FaultDropReply}, payload: "reject", deadline: deadline,
			wantCode: codes.DeadlineExceeded, wantHandled: 1, wantForwarded: true, wantReached: true,
			wantUpstream: codes.InvalidArgument, minElapsed: deadline},
		{name: "delay-past-deadline", step: Step{Fault: FaultDelay, Delay: 3 * deadline}, payload: "a", deadline: deadline,
			wantCode: codes.DeadlineExceeded, wantHandled: 1, wantForwarded: true, wantReached: true,
			wantUpstream: codes.OK, minElapsed: deadline},
		{name: "delay-within-deadline", step: Step{Fault: FaultDelay, Delay: 100 * time.Millisecond}, payload: "a",
			deadline: testWait, wantCode: codes.OK, wantReply: "echo:a", wantHandled: 1, wantForwarded: true,
			wantReached: true, wantUpstream: codes.OK, minElapsed: 100 * time.Millisecond},
		{name: "delay-of-rejection", step: Step{Fault: FaultDelay, Delay: 50 * time.Millisecond}, payload: "reject",
			deadline: testWait, wantCode: codes.InvalidArgument, wantHandled: 1, wantForwarded: true,
			wantReached: true, wantUpstream: codes.InvalidArgument, minElapsed: 50 * time.Millisecond},
		{name: "cut-connection", step: Step{Fault: FaultCutConnection}, payload: "a", deadline: testWait,
			wantCode: codes.Unavailable, wantHandled: 1, wantForwarded: true, wantReached: true, wantUpstream: codes.OK},
		{name: "unavailable", step: Step{Fault: FaultUnavailable}, payload: "a", deadline: testWait,
			wantCode: codes.Unavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			es, up := startUpstream(t)
			plan := Plan{Rules: map[string]Rule{methodUnary: {Sequence: []Step{c.step}}}}
			p := startProxy(t, up, Options{Plan: plan})
			cc := dial(t, p.Addr())

			start := time.Now() // before the deadline is set: it is start + c.deadline at the earliest
			ctx, cancel := context.WithTimeout(context.Background(), c.deadline)
			defer cancel()
			got, err := callUnary(ctx, cc, methodUnary, c.payload)
			elapsed := time.Since(start)
			if code := status.Code(err); code != c.wantCode {
				t.Fatalf("caller saw %v, want %v", err, c.wantCode)
			}
			if c.wantCode == codes.OK && got != c.wantReply {
				t.Errorf("reply %q, want %q", got, c.wantReply)
			}
			if elapsed < c.minElapsed {
				t.Errorf("caller answered after %v, want >= %v", elapsed, c.minElapsed)
			}
			r := waitDone(t, p, methodUnary, 1)[0]
			if r.Step != c.step || r.Index != 0 || r.Random {
				t.Errorf("record step %v index %d random %v, want %v index 0 fixed", r.Step, r.Index, r.Random, c.step)
			}
			if r.Forwarded != c.wantForwarded || r.UpstreamReached != c.wantReached {
				t.Errorf("record forwarded %v reached %v, want %v %v", r.Forwarded, r.UpstreamReached, c.wantForwarded, c.wantReached)
			}
			if c.wantReached && (!r.UpstreamDone || r.UpstreamCode != c.wantUpstream) {
				t.Errorf("record upstream done %v code %v, want done %v", r.UpstreamDone, r.UpstreamCode, c.wantUpstream)
			}
			if !c.wantForwarded && r.UpstreamDone {
				t.Errorf("record upstream done for a call never forwarded: %+v", r)
			}
			if n := es.handled.Load(); n != c.wantHandled {
				t.Errorf("upstream handled %d requests, want %d", n, c.wantHandled)
			}
			// The call after the sequence gets no fault, on the same client
			// connection (a cut one reconnects).
			ctx2, cancel2 := context.WithTimeout(context.Background(), testWait)
			defer cancel2()
			if got, err := callUnary(ctx2, cc, methodUnary, "next"); err != nil || got != "echo:next" {
				t.Errorf("next call: %q, %v; want echo:next", got, err)
			}
			recs := waitDone(t, p, methodUnary, 2)
			if recs[1].Index != 1 || recs[1].Step.Fault != FaultNone {
				t.Errorf("second record = %+v, want index 1, none", recs[1])
			}
		})
	}
}

// TestDropReplyCallerCancels: a caller that cancels (no deadline) during a
// dropped reply sees CANCELED, and the upstream still ran to completion
// (what a C-4 case relies on).
func TestDropReplyCallerCancels(t *testing.T) {
	es, up := startUpstream(t)
	p := startProxy(t, up, Options{Plan: Plan{Default: Rule{Sequence: []Step{{Fault: FaultDropReply}}}}})
	cc := dial(t, p.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := callUnary(ctx, cc, methodUnary, "a")
		errc <- err
	}()
	// Wait until the upstream's outcome is recorded, then give up.
	wctx, wcancel := context.WithTimeout(context.Background(), testWait)
	defer wcancel()
	for {
		p.mu.Lock()
		recs := p.epoch.records[methodUnary]
		done := len(recs) == 1 && recs[0].UpstreamDone
		ch := p.changed
		p.mu.Unlock()
		if done {
			break
		}
		select {
		case <-ch:
		case <-wctx.Done():
			t.Fatal("upstream outcome never recorded")
		}
	}
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Errorf("caller: %v, want CANCELED", err)
	}
	r := waitDone(t, p, methodUnary, 1)[0]
	if !r.UpstreamReached || r.UpstreamCode != codes.OK || es.handled.Load() != 1 {
		t.Errorf("record %+v, handled %d; want upstream reached OK once", r, es.handled.Load())
	}
}

// TestFaultsOnServerStream: reply-side faults apply to a whole server
// stream: a cut or a drop delivers no items, a delay delivers all of them.
func TestFaultsOnServerStream(t *testing.T) {
	_, up := startUpstream(t)
	for _, c := range []struct {
		step     Step
		wantCode codes.Code
	}{
		{Step{Fault: FaultCutConnection}, codes.Unavailable},
		{Step{Fault: FaultUnavailable}, codes.Unavailable},
		{Step{Fault: FaultDropReply}, codes.DeadlineExceeded},
		{Step{Fault: FaultDelay, Delay: 20 * time.Millisecond}, codes.OK},
	} {
		t.Run(c.step.String(), func(t *testing.T) {
			p := startProxy(t, up, Options{Plan: Plan{Rules: map[string]Rule{methodServerStream: {Sequence: []Step{c.step}}}}})
			cc := dial(t, p.Addr())
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			s, err := cc.NewStream(ctx, anyStream, methodServerStream, grpc.CallContentSubtype(rawSubtype))
			if err != nil {
				t.Fatal(err)
			}
			s.SendMsg(&frame{payload: []byte("3")}) //nolint:errcheck // the status comes from RecvMsg
			s.CloseSend()
			var items int
			var last error
			for {
				if last = s.RecvMsg(new(frame)); last != nil {
					break
				}
				items++
			}
			code := status.Code(last)
			if errors.Is(last, io.EOF) {
				code = codes.OK
			}
			if code != c.wantCode {
				t.Errorf("stream ended with %v, want %v", last, c.wantCode)
			}
			if want := map[bool]int{true: 3, false: 0}[c.wantCode == codes.OK]; items != want {
				t.Errorf("items = %d, want %d", items, want)
			}
		})
	}
}
