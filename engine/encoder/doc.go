// Package encoder is baton's image encoder: bounded media decoding (rule
// L-6), the content hash (rule H-1), preprocessing, and a deterministic CPU
// encoder (a two-layer MLP over image patches) behind the Encoder interface.
//
// The path of one image through the package:
//
//	DecodeDataURI (data URIs only) -> Decode -> ContentHash  (identity, H-1)
//	                                         -> Encoder.Encode = Preprocess + MLP
//
// Errors: every rejection of client media is one of the sentinel errors
// ErrMediaTooLarge, ErrDecompressionBomb, ErrUnsupportedFormat,
// ErrCorruptMedia and ErrBadDataURI, wrapped with %w. All of them mean gRPC
// INVALID_ARGUMENT for the server (rule L-6, and SU-4 for undecodable
// media). Video and audio items (rule L-3, UNIMPLEMENTED) are rejected by the
// server from MediaItem.modality before this package is called.
//
// Determinism: decoding, hashing and preprocessing use integer or IEEE
// float64 arithmetic in a fixed order and the CPU encoder's matrix products
// sum in a fixed order per output element, so the same image gives the same
// bits on every run of the same binary, whatever the batch it is in. The
// content hash is integer-only and therefore equal on every platform.
package encoder
