package handoff

// Bounds on the fields of an EncoderCacheRef outside its opaque state
// (CONTRACT SU-4; L-1 bounds the opaque state itself). A consumer forwards
// a transfer reference to its producer unchanged inside a
// TransferEncoderCacheRequest, so every field it forwards must be bounded
// before it dials anything: the attack report's A1 padded
// producer_endpoint.protocol until the forwarded request was larger than
// the producer's receive limit, which refused it without the before-write
// trailer and made the consumer quarantine.
const (
	// MaxEndpointHostBytes bounds producer_endpoint.host: a DNS name is at
	// most 253 bytes (RFC 1035 section 2.3.4 without the trailing dot).
	MaxEndpointHostBytes = 253
	// MaxEndpointProtocolBytes bounds producer_endpoint.protocol, a short
	// token ("grpc", "grpcs").
	MaxEndpointProtocolBytes = 32
	// MaxBackendBytes bounds EncoderCacheRef.backend, a short token
	// ("shared_dir", "tcp", "cuda_ipc").
	MaxBackendBytes = 32
	// MaxInstanceIDBytes bounds producer_instance_id: a UUID is 36 bytes;
	// another engine's instance id may be longer, not unbounded.
	MaxInstanceIDBytes = 64
)

// checkOuter is the SU-4 check of a reference's outer fields, pure and
// keyless; it never echoes more than a few bytes of a field it refuses.
//
//   - backend: at most MaxBackendBytes of [A-Za-z0-9_.+-] (whether this
//     consumer accepts it is N-1's);
//   - producer_instance_id: at most MaxInstanceIDBytes of printable ASCII
//     without spaces (whether it is a lowercase UUID naming this
//     producer, and no path, is SU-5's: CheckIDs, Verify);
//   - producer_endpoint: absent (host "", port 0), or a host that is a DNS
//     name (labels of 1..63 letters, digits, '-' and '_', not starting or
//     ending with '-'; at most MaxEndpointHostBytes, one trailing dot
//     allowed) or an IP literal without brackets, with a port 1..65535;
//     protocol at most MaxEndpointProtocolBytes of [A-Za-z0-9_.+-] (empty
//     allowed). Whether the endpoint is trusted is SE-3's.
func checkOuter(backend, producerInstanceID string, ep Endpoint) error {
	switch {
	case !token(backend, MaxBackendBytes):
		return rejectf(ErrMalformedReference, "SU-4 backend (%d bytes, %.20q) is not a token of at most %d bytes", len(backend), backend, MaxBackendBytes)
	case !printable(producerInstanceID, MaxInstanceIDBytes):
		return rejectf(ErrMalformedReference, "SU-4 producer_instance_id (%d bytes, %.40q) is not at most %d bytes of printable ASCII", len(producerInstanceID), producerInstanceID, MaxInstanceIDBytes)
	case !token(ep.Protocol, MaxEndpointProtocolBytes):
		return rejectf(ErrMalformedReference, "SU-4 producer_endpoint.protocol (%d bytes, %.20q) is not a token of at most %d bytes", len(ep.Protocol), ep.Protocol, MaxEndpointProtocolBytes)
	case ep.Host == "" && ep.Port != 0:
		return rejectf(ErrMalformedReference, "SU-4 producer_endpoint has port %d and no host", ep.Port)
	case ep.Host == "":
		return nil // no endpoint: a transfer backend refuses it (SE-3)
	case !ValidHost(ep.Host):
		return rejectf(ErrMalformedReference, "SU-4 producer_endpoint.host (%d bytes, %.60q) is neither a DNS name of at most %d bytes nor an IP literal", len(ep.Host), ep.Host, MaxEndpointHostBytes)
	case ep.Port == 0 || ep.Port > 65535:
		return rejectf(ErrMalformedReference, "SU-4 producer_endpoint.port %d is outside 1..65535", ep.Port)
	}
	return nil
}

// ValidHost reports whether h is a DNS name (labels of 1..63 letters,
// digits, '-' or '_', none starting or ending with '-', at most
// MaxEndpointHostBytes bytes, one trailing dot allowed) or an IPv4 or IPv6
// literal without brackets or zone. (A loop, not net/netip: the core is
// small and the check runs on every consume.)
func ValidHost(h string) bool {
	if len(h) == 0 || len(h) > MaxEndpointHostBytes+1 {
		return false
	}
	if ipv6Literal(h) {
		return true
	}
	name := h
	if name[len(name)-1] == '.' {
		name = name[:len(name)-1]
	}
	if len(name) == 0 || len(name) > MaxEndpointHostBytes {
		return false
	}
	label := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if label == 0 || name[i-1] == '-' {
				return false
			}
			label = 0
			continue
		case c == '-':
			if label == 0 {
				return false
			}
		case c == '_', c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		default:
			return false
		}
		label++
		if label > 63 {
			return false
		}
	}
	return name[len(name)-1] != '-'
}

// ipv6Literal reports whether h is an IPv6 address as text (RFC 4291
// section 2.2, an embedded IPv4 tail allowed), without brackets or zone.
func ipv6Literal(h string) bool {
	if len(h) < 2 || len(h) > 45 {
		return false
	}
	groups, double := 0, false
	i := 0
	if h[0] == ':' {
		if h[1] != ':' {
			return false
		}
		double, i = true, 2
		if len(h) == 2 {
			return true
		}
	}
	for i < len(h) {
		j := i
		for j < len(h) && j-i < 5 && hexDigit(h[j]) {
			j++
		}
		if j < len(h) && h[j] == '.' { // an IPv4 tail ends the address
			if !ipv4Literal(h[i:]) {
				return false
			}
			groups += 2
			i = len(h)
			break
		}
		if j == i || j-i > 4 {
			return false
		}
		groups++
		i = j
		if i == len(h) {
			break
		}
		if h[i] != ':' {
			return false
		}
		i++
		if i < len(h) && h[i] == ':' {
			if double {
				return false
			}
			double = true
			i++
			if i == len(h) {
				break
			}
		} else if i == len(h) {
			return false // a trailing single colon
		}
	}
	if double {
		return groups < 8
	}
	return groups == 8
}

// ipv4Literal reports whether s is a dotted-quad IPv4 address (each part
// 0..255, no leading zeros).
func ipv4Literal(s string) bool {
	parts, n, digits := 0, 0, 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if digits == 0 || n > 255 {
				return false
			}
			parts++
			n, digits = 0, 0
			continue
		}
		c := s[i]
		if c < '0' || c > '9' || (digits == 1 && n == 0) {
			return false
		}
		n = n*10 + int(c-'0')
		digits++
	}
	return parts == 4
}

func hexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// token reports whether s is at most max bytes of [A-Za-z0-9_.+-] (empty allowed).
func token(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '.' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}

// printable reports whether s is at most max bytes of printable ASCII
// without spaces (0x21..0x7e; empty allowed).
func printable(s string, max int) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
