// Package contenthash is the content hash of a decoded image (CONTRACT H-1,
// H-4): a SHA-256 over a domain tag, the preprocessing preset's name, the
// image size and its pixels as non-premultiplied 16-bit RGBA. Standard
// library only; the engine's encoder (engine/encoder.ContentHash) and the
// simulator (sim/world/media.go) call the same function. Test vectors:
// engine/encoder/testdata/content_hash_vectors.json.
package contenthash
