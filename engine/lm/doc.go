// Package lm is baton's deterministic toy language model: a tokenizer, a
// next-token function over prompt tokens and image embeddings, greedy decode
// with OpenEngine stopping options, and a bounded prefix cache keyed by token
// ids AND image identities (content hashes).
//
// It stands in for the language model of a multimodal engine so that baton can
// certify encoder -> consumer handoffs by their visible effect: the consumer (PD
// or P) receives float32 image embeddings [rows, cols] plus each image's content
// hash and runs this model; the aggregated engine encodes and runs it in one
// process. Because the model is a pure function of (seed, prompt token ids, image
// embeddings), equal inputs give token-identical output and equal usage
// (CONTRACT B-1), and different images with the same prompt give different
// answers (B-2), which is what catches cross-image cache reuse.
//
// # Shape of a request
//
// The prompt marks image positions with the literal "<image>" (token ImageID),
// one marker per image, in order; with no marker all images go before the prompt
// ("How requests look" in CONTRACT.md). Each image occupies Rows prompt positions,
// like the placeholder tokens of real VLMs, so
//
//	usage.prompt_tokens = text tokens (markers excluded) + sum(image rows).
//
// # The next-token function
//
// State is a 64-bit hash chain (splitmix64 finalizer) seeded from Config.Seed.
// Every text token id is absorbed in order; an image marker absorbs (rows, cols)
// and the image's Signature. Each decode step derives a keyed hash h of the
// state: after the first eosFreeSteps tokens, h mod eosOneIn == 0 means EOS
// (about 1 in 12, so answers are typically 5-40 tokens long); otherwise the token
// is outputIDs[h>>32 mod len(outputIDs)], a word or punctuation token. The chosen
// token is absorbed, so decoding is autoregressive, and the whole decode state is
// one uint64: Session serialises to 32 bytes for a prefill/decode split (E+P+D).
//
// # Reading embeddings robustly
//
// ImageSignature splits the rows into up to signatureBands contiguous bands
// (horizontal stripes of the patch grid), mean-pools each band over its rows
// (float64, fixed order), removes the band vector's average over columns (a
// constant offset, common after ReLU/GELU, would otherwise dominate every
// projection), and keeps the sign bits of 64 fixed Rademacher (+-1) projections
// per band, drawn from a fixed seed: 256 bits in all. Sign-of-random-projection
// is the classic locality-sensitive hash for angles, so two embeddings give the
// same signature unless they point in nearly the same direction.
//
// A GPU encoder whose outputs differ from the CPU reference by relative error
// ~1e-5 gives the same signature except in pathological cases: a bit flips only
// when the error carries its projection across zero. A projection p has standard
// deviation sigma_p and the error moves it by sigma_n; it flips with probability
// about sigma_n/(pi*sigma_p). For independent relative errors e (uniform in
// [-e, e]) over unit-scale entries, pooling and projecting grow signal and error
// alike, so sigma_n/sigma_p ~ e/sqrt(3): for e = 1e-5 one bit flips with
// probability ~2e-6, and one of the 256 bits for about 5 images in 10,000. Fully
// correlated errors of size e give at most ~256*e/pi ~ 1e-3 per image, and a
// common positive scale factor (all outputs * (1+e)) changes nothing.
// TestSignatureRobustToNoise measures it: no change at 1e-5 on [196, 512]
// embeddings, about 3% of images at 1e-3 and 35% at 1e-2.
//
// Identical float32 inputs give identical signatures on every machine: the
// float64 sums run in a fixed order and use only additions and divisions (no
// multiply-add the compiler could fuse differently on arm64), which is what B-1
// needs when embeddings travel bit-exactly.
//
// # Prefix cache and identities (H-2)
//
// Prefill keys its bounded LRU prefix cache by Config.PrefixKey(token ids,
// image identities). An image's identity is its content hash, or, when the hash
// is missing, a fresh random identity drawn from Config.Rand (CONTRACT H-2), so a
// request never hits a cache entry through placeholder tokens alone. The cache
// stores the computed state, so a wrong key (a deliberately broken engine that
// keys by text only) really answers about the wrong image.
//
// Model is safe for concurrent use; no lock is held while tokens are emitted.
package lm
