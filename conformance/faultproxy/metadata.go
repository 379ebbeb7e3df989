package faultproxy

import (
	"strings"

	"google.golang.org/grpc/metadata"
)

// forwardable returns a copy of md without the keys gRPC's transport owns:
// pseudo-headers (":authority"), "grpc-*" (timeout, status, status details,
// encodings: each travels through its own API), "content-type",
// "user-agent" and "te". Everything else, "-bin" keys included, is kept.
func forwardable(md metadata.MD) metadata.MD {
	out := metadata.MD{}
	for k, vs := range md {
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") {
			continue
		}
		switch k {
		case "content-type", "user-agent", "te":
			continue
		}
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// contentSubtype returns the caller's content-subtype ("proto" for
// "application/grpc+proto"), or "" for plain "application/grpc" or none.
func contentSubtype(md metadata.MD) string {
	for _, ct := range md.Get("content-type") {
		ct = strings.ToLower(ct)
		if !strings.HasPrefix(ct, "application/grpc") {
			continue
		}
		rest := ct[len("application/grpc"):]
		if len(rest) > 1 && (rest[0] == '+' || rest[0] == ';') {
			return rest[1:]
		}
		return ""
	}
	return ""
}
