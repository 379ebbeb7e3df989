package encoder

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/baton-dev/baton/fixtures"
)

func TestDecodeDataURI(t *testing.T) {
	im, err := fixtures.ImageByName("basn6a08.png")
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(im.Data)
	raw := base64.RawStdEncoding.EncodeToString(im.Data)
	if b64 == raw {
		t.Fatal("fixture length is a multiple of 3; pick one that needs padding")
	}
	tests := []struct {
		name     string
		uri      string
		lim      Limits
		want     error
		wantMIME string
	}{
		{"png", "data:image/png;base64," + b64, Limits{}, nil, "image/png"},
		{"unpadded base64", "data:image/png;base64," + raw, Limits{}, nil, "image/png"},
		{"upper-case scheme and type", "DATA:IMAGE/PNG;BASE64," + b64, Limits{}, nil, "image/png"},
		{"parameter before base64", "data:image/png;name=x.png;base64," + b64, Limits{}, nil, "image/png"},
		{"mime is advisory", "data:image/jpeg;base64," + b64, Limits{}, nil, "image/jpeg"},
		{"image/jpg alias", "data:image/jpg;base64," + b64, Limits{}, nil, "image/jpg"},
		{"no scheme", "image/png;base64," + b64, Limits{}, ErrBadDataURI, ""},
		{"http scheme", "http://example.com/x.png", Limits{}, ErrBadDataURI, ""},
		{"empty", "", Limits{}, ErrBadDataURI, ""},
		{"no comma", "data:image/png;base64" + b64, Limits{}, ErrBadDataURI, ""},
		{"not base64 form", "data:image/png," + b64, Limits{}, ErrBadDataURI, ""},
		{"empty media type", "data:;base64," + b64, Limits{}, ErrBadDataURI, ""},
		{"text type", "data:text/plain;base64," + b64, Limits{}, ErrBadDataURI, ""},
		{"video type", "data:video/mp4;base64," + b64, Limits{}, ErrBadDataURI, ""},
		{"unsupported image type", "data:image/bmp;base64," + b64, Limits{}, ErrUnsupportedFormat, ""},
		{"empty payload", "data:image/png;base64,", Limits{}, ErrBadDataURI, ""},
		{"bad base64", "data:image/png;base64,@@@@" + b64, Limits{}, ErrBadDataURI, ""},
		{"bad padding", "data:image/png;base64,QQ=", Limits{}, ErrBadDataURI, ""},
		{"uri over its bound", "data:image/png;base64," + b64, Limits{MaxDataURIBytes: 22 + len(b64) - 1}, ErrMediaTooLarge, ""},
		{"payload over the encoded bound", "data:image/png;base64," + b64, Limits{MaxEncodedBytes: len(im.Data) - 1}, ErrMediaTooLarge, ""},
		{"payload at the encoded bound", "data:image/png;base64," + b64, Limits{MaxEncodedBytes: len(im.Data)}, nil, "image/png"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, mime, err := DecodeDataURI(tt.uri, tt.lim)
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if err != nil {
				return
			}
			if mime != tt.wantMIME || !bytes.Equal(data, im.Data) {
				t.Errorf("mime %q, %d bytes; want %q, the fixture's %d bytes", mime, len(data), tt.wantMIME, len(im.Data))
			}
		})
	}
}

// A huge data URI is rejected by length before it is parsed or decoded.
func TestDecodeDataURIOversize_L6(t *testing.T) {
	uri := "data:image/png;base64," + strings.Repeat("A", DefaultMaxDataURIBytes)
	if _, _, err := DecodeDataURI(uri, DefaultLimits()); !errors.Is(err, ErrMediaTooLarge) {
		t.Fatalf("error %v, want ErrMediaTooLarge", err)
	}
}

// TestDataURIHashEqualsRaw_H4: a data URI and its raw bytes hash equal.
func TestDataURIHashEqualsRaw_H4(t *testing.T) {
	for _, im := range fixtures.Images()[:4] {
		data, _, err := DecodeDataURI("data:image/"+im.Format+";base64,"+base64.StdEncoding.EncodeToString(im.Data), Limits{})
		if err != nil {
			t.Fatalf("%s: %v", im.Name, err)
		}
		a, _, err := Decode(data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := Decode(im.Data, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if ContentHash(Tiny, a) != ContentHash(Tiny, b) {
			t.Errorf("%s: data URI and raw bytes hash differently", im.Name)
		}
	}
}
