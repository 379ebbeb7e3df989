package shareddir

import (
	"cmp"
	"encoding/binary"
	"maps"
	"math"
	"slices"
)

// decodeSafetensorsCanonical is DecodeSafetensors' fast path. It reads only
// headers in the canonical shape EncodeSafetensors writes: no whitespace
// inside the object (only trailing " \t\r\n" after it), keys and string
// values of printable ASCII without '"' or '\' (so their JSON value is their
// bytes), an optional "__metadata__" object of such strings, and tensor
// entries exactly {"dtype":S,"shape":[N,...],"data_offsets":[N,N]} with
// integers 0 or [1-9][0-9]* of at most 19 digits (no uint64 overflow). Every
// such header is valid JSON that the JSON path decodes to the same keys and
// values, so when the same checks as the JSON path's all pass here, the JSON
// path accepts the input with the same result. ok is false for anything
// else (any other syntax, a duplicate key, any failed check): the caller
// then runs the JSON path, which owns every rejection and its message.
// FuzzSafetensorsFastPath checks the two agree.
func decodeSafetensorsCanonical(b []byte, maxHeaderBytes int) (tensors []Tensor, metadata map[string]string, ok bool) {
	if len(b) < headerLenBytes {
		return nil, nil, false
	}
	n := binary.LittleEndian.Uint64(b)
	if n < 2 || maxHeaderBytes < 0 || n > uint64(maxHeaderBytes) || n > uint64(len(b)-headerLenBytes) {
		return nil, nil, false
	}
	p := canonParser{b: b[headerLenBytes : headerLenBytes+int(n)]}
	data := b[headerLenBytes+int(n):]
	if !p.eat('{') {
		return nil, nil, false
	}
	type located struct {
		t          Tensor // Shape not set: see shape
		shape      shapeDims
		begin, end uint64
	}
	var allBuf [4]located // the usual one tensor and few keys: on the stack
	var keyBuf [8]string
	all, keys := allBuf[:0], keyBuf[:0]
	if !p.eat('}') {
		for {
			key, ok := p.str()
			if !ok || !p.eat(':') {
				return nil, nil, false
			}
			for _, k := range keys { // duplicates: the JSON path rejects them
				if k == key {
					return nil, nil, false
				}
			}
			keys = append(keys, key)
			if key == metadataKey {
				md, ok := p.metadata()
				if !ok {
					return nil, nil, false
				}
				metadata = md
			} else {
				var shape shapeDims
				t, begin, end, ok := p.tensor(key, &shape)
				if !ok {
					return nil, nil, false
				}
				all = append(all, located{t, shape, begin, end})
			}
			if p.eat(',') {
				continue
			}
			if p.eat('}') {
				break
			}
			return nil, nil, false
		}
	}
	for ; p.i < len(p.b); p.i++ {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
		default:
			return nil, nil, false
		}
	}
	slices.SortStableFunc(all, func(a, b located) int {
		if c := cmp.Compare(a.begin, b.begin); c != 0 {
			return c
		}
		return cmp.Compare(a.end, b.end)
	})
	var next uint64
	var block *tensorBlock // the usual one tensor: it and its shape in one allocation
	if len(all) == 1 && all[0].shape.big == nil {
		block = new(tensorBlock)
		tensors = block.t[:]
	} else {
		tensors = make([]Tensor, len(all))
	}
	for i, l := range all {
		if l.begin != next || l.end > uint64(len(data)) {
			return nil, nil, false
		}
		l.t.Data = data[l.begin:l.end:l.end]
		switch d := &l.shape; {
		case d.big != nil:
			l.t.Shape = d.big
		case block != nil:
			block.shape = d.small
			l.t.Shape = block.shape[:d.n:d.n]
		default:
			l.t.Shape = append(make([]int, 0, d.n), d.small[:d.n]...)
		}
		tensors[i] = l.t
		next = l.end
	}
	if next != uint64(len(data)) {
		return nil, nil, false
	}
	return tensors, metadata, true
}

// shapeDims is a parsed shape: its n dims in small, or, when there are
// more than small holds, all of them in big.
type shapeDims struct {
	small [4]int
	n     int
	big   []int
}

// tensorBlock holds a decode's one tensor and its shape (at most
// len(shapeDims.small) dims) in one allocation: every claim decodes one.
type tensorBlock struct {
	t     [1]Tensor
	shape [len(shapeDims{}.small)]int
}

// canonParser reads the canonical header b from i on.
type canonParser struct {
	b []byte
	i int
}

func (p *canonParser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// lit eats the bytes of s.
func (p *canonParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// str reads a string of printable ASCII without '"' or '\'.
func (p *canonParser) str() (string, bool) {
	b, ok := p.strBytes()
	if !ok {
		return "", false
	}
	return string(b), true
}

// strBytes is str's string as the bytes of the input it is.
func (p *canonParser) strBytes() ([]byte, bool) {
	if !p.eat('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.b); p.i++ {
		c := p.b[p.i]
		if c == '"' {
			b := p.b[start:p.i]
			p.i++
			return b, true
		}
		if c < 0x20 || c > 0x7e || c == '\\' {
			return nil, false
		}
	}
	return nil, false
}

// dtypeNames are dtypeSizes' keys, sorted.
var dtypeNames = slices.Sorted(maps.Keys(dtypeSizes))

// knownDType returns the dtype name b spells and its element size, if
// dtypeSizes has it: the name is dtypeNames' string, so a decoded
// tensor's DType costs no allocation (every claim decodes one).
func knownDType(b []byte) (string, int, bool) {
	for _, name := range dtypeNames {
		if string(b) == name {
			return name, dtypeSizes[name], true
		}
	}
	return "", 0, false
}

// num reads 0 or [1-9][0-9]* of at most 19 digits.
func (p *canonParser) num() (uint64, bool) {
	start := p.i
	var v uint64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		v = v*10 + uint64(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 19 || (digits > 1 && p.b[start] == '0') {
		return 0, false
	}
	return v, true
}

// metadata reads the "__metadata__" object: strings to strings, no
// duplicate keys.
func (p *canonParser) metadata() (map[string]string, bool) {
	if !p.eat('{') {
		return nil, false
	}
	md := map[string]string{}
	if p.eat('}') {
		return md, true
	}
	for {
		k, ok := p.str()
		if !ok || !p.eat(':') {
			return nil, false
		}
		v, ok := p.str()
		if !ok {
			return nil, false
		}
		if _, dup := md[k]; dup {
			return nil, false
		}
		md[k] = v
		if p.eat(',') {
			continue
		}
		return md, p.eat('}')
	}
}

// tensor reads one tensor entry and makes decodeTensorHeader's checks. It
// returns the tensor without its Shape, which it sets in *shape.
func (p *canonParser) tensor(name string, shape *shapeDims) (Tensor, uint64, uint64, bool) {
	if checkTensorName(name) != nil || !p.lit(`{"dtype":`) {
		return Tensor{}, 0, 0, false
	}
	rawDType, ok := p.strBytes()
	if !ok || !p.lit(`,"shape":[`) {
		return Tensor{}, 0, 0, false
	}
	dtype, size, known := knownDType(rawDType)
	if !known {
		return Tensor{}, 0, 0, false
	}
	var dimsBuf [4]uint64
	dims := dimsBuf[:0]
	if !p.eat(']') {
		for {
			d, ok := p.num()
			if !ok {
				return Tensor{}, 0, 0, false
			}
			dims = append(dims, d)
			if p.eat(',') {
				continue
			}
			if p.eat(']') {
				break
			}
			return Tensor{}, 0, 0, false
		}
	}
	if !p.lit(`,"data_offsets":[`) {
		return Tensor{}, 0, 0, false
	}
	begin, ok := p.num()
	if !ok || !p.eat(',') {
		return Tensor{}, 0, 0, false
	}
	end, ok := p.num()
	if !ok || !p.lit(`]}`) || begin > end {
		return Tensor{}, 0, 0, false
	}
	if want, ok := tensorBytes(dims, size); !ok || want != end-begin {
		return Tensor{}, 0, 0, false
	}
	if len(dims) > len(shape.small) {
		shape.big = make([]int, len(dims))
	}
	for i, d := range dims {
		if d > math.MaxInt {
			return Tensor{}, 0, 0, false
		}
		if shape.big != nil {
			shape.big[i] = int(d)
		} else {
			shape.small[i] = int(d)
		}
	}
	shape.n = len(dims)
	return Tensor{Name: name, DType: dtype}, begin, end, true
}
