package target

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-dev/baton/conformance/faultproxy"
)

// ProxyFaults is a FaultInjector over a running fault proxy
// (conformance/faultproxy) that sits between the consumer and the
// producer's advertised control address. Launch and conformance/launch use
// it.
type ProxyFaults struct {
	// Proxy is the running proxy (nil: every method errors).
	Proxy *faultproxy.Proxy
}

// ErrNoFaultProxy is returned by ProxyFaults' methods without a proxy.
var ErrNoFaultProxy = fmt.Errorf("target: no fault proxy runs for this target")

// proxyFaultKinds maps each TransferFault to the proxy's fault.
var proxyFaultKinds = map[TransferFault]faultproxy.Fault{
	FaultNone:            faultproxy.FaultNone,
	FaultDropRequest:     faultproxy.FaultDropRequest,
	FaultDropReply:       faultproxy.FaultDropReply,
	FaultDelay:           faultproxy.FaultDelay,
	FaultCutConnection:   faultproxy.FaultCutConnection,
	FaultUnavailable:     faultproxy.FaultUnavailable,
	FaultInvalidArgument: faultproxy.FaultInvalidArgument,
}

// SetTransferFaults implements FaultInjector: the next calls of method get
// faults in order (delay for FaultDelay), then none. Errors:
// ErrNoFaultProxy; an unknown fault; the proxy's ErrInvalidPlan.
func (f ProxyFaults) SetTransferFaults(method string, delay time.Duration, faults ...TransferFault) error {
	if f.Proxy == nil {
		return ErrNoFaultProxy
	}
	steps := make([]faultproxy.Step, len(faults))
	for i, k := range faults {
		pf, ok := proxyFaultKinds[k]
		if !ok {
			return fmt.Errorf("target: unknown transfer fault %q", k)
		}
		steps[i] = faultproxy.Step{Fault: pf}
		if pf == faultproxy.FaultDelay {
			steps[i].Delay = delay
		}
	}
	return f.Proxy.SetPlan(faultproxy.Plan{Rules: map[string]faultproxy.Rule{method: {Sequence: steps}}})
}

// RefuseProducerConnections implements ConnectionRefuser: the fault
// proxy, which the consumers trust as the producer's control endpoint,
// unbinds its port and closes its connections until restore binds it
// again (a producer that went away, for CONTRACT Q-2 and SE-4). Errors:
// ErrNoFaultProxy.
func (f ProxyFaults) RefuseProducerConnections(ctx context.Context) (restore func() error, err error) {
	if f.Proxy == nil {
		return nil, ErrNoFaultProxy
	}
	f.Proxy.Refuse()
	return f.Proxy.Listen, nil
}

// TransferCalls implements FaultInjector.
func (f ProxyFaults) TransferCalls(ctx context.Context, method string, n int) ([]TransferCall, error) {
	if f.Proxy == nil {
		return nil, ErrNoFaultProxy
	}
	recs, err := f.Proxy.WaitCalls(ctx, method, n)
	out := make([]TransferCall, len(recs))
	for i, r := range recs {
		code := ""
		if r.UpstreamDone {
			code = CodeName(r.UpstreamCode)
		}
		out[i] = TransferCall{Method: r.Method, Fault: TransferFault(r.Step.Fault.String()), UpstreamReached: r.UpstreamReached, UpstreamCode: code}
	}
	return out, err
}

// TransferArrived implements FaultInjector.
func (f ProxyFaults) TransferArrived(ctx context.Context, method string, n int) error {
	if f.Proxy == nil {
		return ErrNoFaultProxy
	}
	return f.Proxy.WaitArrived(ctx, method, n)
}
