package xfer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The tcp frame, initiator -> target (integers big-endian):
//
//	magic     4 bytes  "BXW1" (a WRITE) or "BXR1" (a READ)
//	targetLen 1 byte   1..255, then the target agent's name
//	fromLen   1 byte   1..255, then the initiator's name
//	count     2 bytes  1..MaxSegments
//	count times:
//	  keyLen  1 byte   1..64, then the remote key
//	  address 8 bytes
//	  length  8 bytes  >= 1; the lengths may not sum past 2^63
//
// The target answers one byte: replyAccept, or replyRefuse and closes. After
// an accept of a WRITE the initiator sends the segments' bytes back to back,
// and the target answers replyAck once every byte is in registered memory.
// After an accept of a READ the target sends the segments' bytes back to
// back, straight from its registered memory, then replyAck once it no longer
// touches that memory; the READ completes on that byte. Anything malformed
// makes the target close the connection without writing a byte.
const (
	frameMagic  = "BXW1"
	readMagic   = "BXR1"
	replyAccept = 0x00
	replyRefuse = 0x01
	replyAck    = 0x00
)

var errMalformedFrame = errors.New("xfer: malformed tcp frame")

// encodeHeader is the header of a WRITE frame.
func encodeHeader(from, target string, segs []Descriptor) []byte {
	return encodeFrame(frameMagic, from, target, segs)
}

// encodeFrame is a frame header with the given magic (frameMagic or readMagic).
func encodeFrame(magic, from, target string, segs []Descriptor) []byte {
	n := len(magic) + 2 + len(target) + len(from) + 2
	for _, s := range segs {
		n += 1 + len(s.RemoteKey) + 16
	}
	b := make([]byte, 0, n)
	b = append(b, magic...)
	b = append(b, byte(len(target)))
	b = append(b, target...)
	b = append(b, byte(len(from)))
	b = append(b, from...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(segs)))
	for _, s := range segs {
		b = append(b, byte(len(s.RemoteKey)))
		b = append(b, s.RemoteKey...)
		b = binary.BigEndian.AppendUint64(b, s.Address)
		b = binary.BigEndian.AppendUint64(b, s.Length)
	}
	return b
}

// readHeader reads one frame header; read reports a READ frame. It
// returns io.EOF only when the connection ended cleanly before the first
// byte of a frame; any other failure wraps errMalformedFrame or is the I/O
// error.
func readHeader(r *bufio.Reader) (from, target string, segs []Descriptor, read bool, err error) {
	var magic [len(frameMagic)]byte
	if n, err := io.ReadFull(r, magic[:]); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return "", "", nil, false, io.EOF
		}
		return "", "", nil, false, noEOF(err)
	}
	switch string(magic[:]) {
	case frameMagic:
	case readMagic:
		read = true
	default:
		return "", "", nil, false, fmt.Errorf("%w: bad magic", errMalformedFrame)
	}
	from, target, segs, err = readSegments(r)
	return from, target, segs, read, err
}

// readSegments reads the rest of a header after its magic.
func readSegments(r *bufio.Reader) (from, target string, segs []Descriptor, err error) {
	readName := func() (string, error) {
		n, err := r.ReadByte()
		if err != nil {
			return "", noEOF(err)
		}
		if n == 0 {
			return "", fmt.Errorf("%w: empty name", errMalformedFrame)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", noEOF(err)
		}
		return string(b), nil
	}
	if target, err = readName(); err != nil {
		return "", "", nil, err
	}
	if from, err = readName(); err != nil {
		return "", "", nil, err
	}
	var fixed [16]byte
	if _, err := io.ReadFull(r, fixed[:2]); err != nil {
		return "", "", nil, noEOF(err)
	}
	count := int(binary.BigEndian.Uint16(fixed[:2]))
	if count == 0 || count > MaxSegments {
		return "", "", nil, fmt.Errorf("%w: %d segments", errMalformedFrame, count)
	}
	var total uint64
	segs = make([]Descriptor, 0, count)
	for range count {
		kl, err := r.ReadByte()
		if err != nil {
			return "", "", nil, noEOF(err)
		}
		if kl == 0 || kl > maxRemoteKeyBytes {
			return "", "", nil, fmt.Errorf("%w: %d-byte key", errMalformedFrame, kl)
		}
		key := make([]byte, kl)
		if _, err := io.ReadFull(r, key); err != nil {
			return "", "", nil, noEOF(err)
		}
		if _, err := io.ReadFull(r, fixed[:]); err != nil {
			return "", "", nil, noEOF(err)
		}
		s := Descriptor{
			Address:    binary.BigEndian.Uint64(fixed[:8]),
			Length:     binary.BigEndian.Uint64(fixed[8:]),
			MemoryKind: MemoryHost,
			RemoteKey:  key,
		}
		if s.Length == 0 || s.Length > 1<<63-total {
			return "", "", nil, fmt.Errorf("%w: segment length %d", errMalformedFrame, s.Length)
		}
		total += s.Length
		segs = append(segs, s)
	}
	return from, target, segs, nil
}

// noEOF turns a clean EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
