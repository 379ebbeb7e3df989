package openenginev1_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/descriptorpb"

	openenginev1 "github.com/baton-dev/baton/proto/openengine/v1"
)

// protoRoot is the import root of the .proto files, relative to this
// package's folder (go test runs in the package folder).
const protoRoot = "../.."

// protoPackage is the proto package every file here declares.
const protoPackage = "openengine.v1"

// generatedFiles are the descriptors compiled into the generated code.
var generatedFiles = []protoreflect.FileDescriptor{
	openenginev1.File_openengine_v1_common_proto,
	openenginev1.File_openengine_v1_encoder_proto,
	openenginev1.File_openengine_v1_inference_proto,
	openenginev1.File_openengine_v1_control_proto,
}

// sourceProtoPaths lists the .proto files in this folder as import paths
// ("openengine/v1/x.proto"), sorted.
func sourceProtoPaths(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob("*.proto")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no .proto files found next to the generated code")
	}
	paths := make([]string, 0, len(names))
	for _, n := range names {
		paths = append(paths, "openengine/v1/"+n)
	}
	sort.Strings(paths)
	return paths
}

// compileProtos compiles paths (import paths under root) with protocompile,
// the well-known imports included. overlay, when non-nil, replaces the
// contents of the named import paths. It returns one FileDescriptorProto per
// path, source_code_info cleared.
func compileProtos(root string, overlay map[string]string, paths ...string) ([]*descriptorpb.FileDescriptorProto, error) {
	resolver := &protocompile.SourceResolver{ImportPaths: []string{root}}
	if overlay != nil {
		resolver.Accessor = func(path string) (io.ReadCloser, error) {
			rel, err := filepath.Rel(root, path)
			if err == nil {
				if src, ok := overlay[filepath.ToSlash(rel)]; ok {
					return io.NopCloser(strings.NewReader(src)), nil
				}
			}
			return os.Open(path)
		}
	}
	compiler := protocompile.Compiler{Resolver: protocompile.WithStandardImports(resolver)}
	files, err := compiler.Compile(context.Background(), paths...)
	if err != nil {
		return nil, err
	}
	out := make([]*descriptorpb.FileDescriptorProto, 0, len(files))
	for _, f := range files {
		fdp := protodesc.ToFileDescriptorProto(f)
		fdp.SourceCodeInfo = nil
		out = append(out, fdp)
	}
	return out, nil
}

// generatedProto returns the FileDescriptorProto embedded in the generated
// code, source_code_info cleared.
func generatedProto(fd protoreflect.FileDescriptor) *descriptorpb.FileDescriptorProto {
	fdp := protodesc.ToFileDescriptorProto(fd)
	fdp.SourceCodeInfo = nil
	return fdp
}

// short renders m as one-line text for diff messages.
func short(m proto.Message) string {
	return prototext.MarshalOptions{}.Format(m)
}

// descriptorDiff lists, by name, what differs between want (compiled from
// .proto) and got (generated code): messages (nested included), fields,
// oneofs, enums, enum values, services, methods and file-level settings.
// It returns nil when the descriptors are equal.
func descriptorDiff(want, got *descriptorpb.FileDescriptorProto) []string {
	if proto.Equal(want, got) {
		return nil
	}
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }

	if want.GetPackage() != got.GetPackage() {
		add("package: .proto has %q, generated has %q", want.GetPackage(), got.GetPackage())
	}
	if !cmp.Equal(want.GetDependency(), got.GetDependency()) {
		add("imports: .proto has %v, generated has %v", want.GetDependency(), got.GetDependency())
	}
	if !proto.Equal(want.GetOptions(), got.GetOptions()) {
		add("file options: .proto has {%s}, generated has {%s}", short(want.GetOptions()), short(got.GetOptions()))
	}
	diffMessages(want.GetPackage(), want.GetMessageType(), got.GetMessageType(), add)
	diffEnums(want.GetPackage(), want.GetEnumType(), got.GetEnumType(), add)
	diffServices(want.GetPackage(), want.GetService(), got.GetService(), add)
	if len(diffs) == 0 {
		// Something outside the named parts differs; show the raw diff.
		add("%s", cmp.Diff(want, got, protocmp.Transform()))
	}
	return diffs
}

// named is a descriptor proto with a name.
type named interface {
	proto.Message
	GetName() string
}

// pairByName calls both for names present on both sides and reports names
// present on one side only.
func pairByName[T named](scope, kind string, want, got []T, add func(string, ...any), both func(full string, w, g T)) {
	gotByName := make(map[string]T, len(got))
	for _, g := range got {
		gotByName[g.GetName()] = g
	}
	seen := make(map[string]bool, len(want))
	for _, w := range want {
		full := scope + "." + w.GetName()
		seen[w.GetName()] = true
		g, ok := gotByName[w.GetName()]
		if !ok {
			add("%s %s: in .proto, missing from generated code", kind, full)
			continue
		}
		both(full, w, g)
	}
	for _, g := range got {
		if !seen[g.GetName()] {
			add("%s %s.%s: in generated code, missing from .proto", kind, scope, g.GetName())
		}
	}
}

func diffMessages(scope string, want, got []*descriptorpb.DescriptorProto, add func(string, ...any)) {
	pairByName(scope, "message", want, got, add, func(full string, w, g *descriptorpb.DescriptorProto) {
		if proto.Equal(w, g) {
			return
		}
		before := 0
		counting := func(format string, args ...any) { before++; add(format, args...) }
		pairByName(full, "field", w.GetField(), g.GetField(), counting, func(ff string, wf, gf *descriptorpb.FieldDescriptorProto) {
			if !proto.Equal(wf, gf) {
				counting("field %s: .proto has {%s}, generated has {%s}", ff, short(wf), short(gf))
			}
		})
		pairByName(full, "oneof", w.GetOneofDecl(), g.GetOneofDecl(), counting, func(of string, wo, gone *descriptorpb.OneofDescriptorProto) {
			if !proto.Equal(wo, gone) {
				counting("oneof %s: .proto has {%s}, generated has {%s}", of, short(wo), short(gone))
			}
		})
		diffMessages(full, w.GetNestedType(), g.GetNestedType(), counting)
		diffEnums(full, w.GetEnumType(), g.GetEnumType(), counting)
		if before == 0 {
			counting("message %s: differs outside its fields: %s", full, cmp.Diff(w, g, protocmp.Transform()))
		}
	})
}

func diffEnums(scope string, want, got []*descriptorpb.EnumDescriptorProto, add func(string, ...any)) {
	pairByName(scope, "enum", want, got, add, func(full string, w, g *descriptorpb.EnumDescriptorProto) {
		if proto.Equal(w, g) {
			return
		}
		before := 0
		counting := func(format string, args ...any) { before++; add(format, args...) }
		pairByName(full, "enum value", w.GetValue(), g.GetValue(), counting, func(vf string, wv, gv *descriptorpb.EnumValueDescriptorProto) {
			if !proto.Equal(wv, gv) {
				counting("enum value %s: .proto has {%s}, generated has {%s}", vf, short(wv), short(gv))
			}
		})
		if before == 0 {
			counting("enum %s: differs outside its values: %s", full, cmp.Diff(w, g, protocmp.Transform()))
		}
	})
}

func diffServices(scope string, want, got []*descriptorpb.ServiceDescriptorProto, add func(string, ...any)) {
	pairByName(scope, "service", want, got, add, func(full string, w, g *descriptorpb.ServiceDescriptorProto) {
		if proto.Equal(w, g) {
			return
		}
		before := 0
		counting := func(format string, args ...any) { before++; add(format, args...) }
		pairByName(full, "method", w.GetMethod(), g.GetMethod(), counting, func(mf string, wm, gm *descriptorpb.MethodDescriptorProto) {
			if !proto.Equal(wm, gm) {
				counting("method %s: .proto has {%s}, generated has {%s}", mf, short(wm), short(gm))
			}
		})
		if before == 0 {
			counting("service %s: differs outside its methods: %s", full, cmp.Diff(w, g, protocmp.Transform()))
		}
	})
}

// TestGeneratedCodeIsCurrent fails when the committed *.pb.go files were not
// regenerated after a .proto edit (run `make proto`).
func TestGeneratedCodeIsCurrent(t *testing.T) {
	paths := sourceProtoPaths(t)
	compiled, err := compileProtos(protoRoot, nil, paths...)
	if err != nil {
		t.Fatalf("compile .proto files: %v", err)
	}

	generated := make(map[string]protoreflect.FileDescriptor)
	protoregistry.GlobalFiles.RangeFilesByPackage(protoPackage, func(fd protoreflect.FileDescriptor) bool {
		generated[fd.Path()] = fd
		return true
	})
	for _, fd := range generatedFiles {
		generated[fd.Path()] = fd
	}

	for _, want := range compiled {
		t.Run(want.GetName(), func(t *testing.T) {
			fd, ok := generated[want.GetName()]
			if !ok {
				t.Fatalf("%s has no generated Go code; run `make proto`", want.GetName())
			}
			if diffs := descriptorDiff(want, generatedProto(fd)); diffs != nil {
				t.Errorf("generated code for %s is stale; run `make proto`. Differences:\n  %s",
					want.GetName(), strings.Join(diffs, "\n  "))
			}
		})
	}
	for path := range generated {
		found := false
		for _, p := range paths {
			found = found || p == path
		}
		if !found {
			t.Errorf("generated code for %s has no .proto file; run `make proto`", path)
		}
	}
}

// TestDescriptorDiffNamesTheDrift checks that a drift is caught and reported
// by message and field name, so the staleness test can fail usefully.
func TestDescriptorDiffNamesTheDrift(t *testing.T) {
	base := generatedProto(openenginev1.File_openengine_v1_inference_proto)
	field := func(fdp *descriptorpb.FileDescriptorProto, msg, name string) *descriptorpb.FieldDescriptorProto {
		for _, m := range fdp.GetMessageType() {
			if m.GetName() != msg {
				continue
			}
			for _, f := range m.GetField() {
				if f.GetName() == name {
					return f
				}
			}
		}
		t.Fatalf("no field %s.%s", msg, name)
		return nil
	}
	tests := []struct {
		name   string
		mutate func(fdp *descriptorpb.FileDescriptorProto)
		want   string
	}{
		{"unchanged", func(*descriptorpb.FileDescriptorProto) {}, ""},
		{"field number", func(fdp *descriptorpb.FileDescriptorProto) {
			field(fdp, "GenerateRequest", "encoder").Number = proto.Int32(102)
		}, "field openengine.v1.GenerateRequest.encoder"},
		{"field type", func(fdp *descriptorpb.FileDescriptorProto) {
			field(fdp, "PrefillReady", "decode_preparation").Type = descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
		}, "field openengine.v1.PrefillReady.decode_preparation"},
		{"field removed", func(fdp *descriptorpb.FileDescriptorProto) {
			for _, m := range fdp.GetMessageType() {
				if m.GetName() == "TokenInfo" {
					m.Field = m.Field[:len(m.Field)-1]
				}
			}
		}, "field openengine.v1.TokenInfo.candidates: in generated code, missing from .proto"},
		{"message added", func(fdp *descriptorpb.FileDescriptorProto) {
			fdp.MessageType = append(fdp.MessageType, &descriptorpb.DescriptorProto{Name: proto.String("Extra")})
		}, "message openengine.v1.Extra: in .proto, missing from generated code"},
		{"method streaming", func(fdp *descriptorpb.FileDescriptorProto) {
			fdp.Service[0].Method[0].ServerStreaming = proto.Bool(false)
		}, "method openengine.v1.Inference.Generate"},
		{"go_package", func(fdp *descriptorpb.FileDescriptorProto) {
			fdp.Options.GoPackage = proto.String("example.com/other")
		}, "file options"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := proto.Clone(base).(*descriptorpb.FileDescriptorProto)
			tc.mutate(want)
			diffs := descriptorDiff(want, base)
			if tc.want == "" {
				if diffs != nil {
					t.Fatalf("unchanged descriptor reported differences: %v", diffs)
				}
				return
			}
			joined := strings.Join(diffs, "\n")
			if !strings.Contains(joined, tc.want) {
				t.Fatalf("diff does not name %q:\n%s", tc.want, joined)
			}
		})
	}
}

// TestCompileRejectsMalformedProto checks that a broken or inconsistent
// .proto fails the compile step instead of comparing as empty.
func TestCompileRejectsMalformedProto(t *testing.T) {
	tests := []struct {
		name string
		src  string
	}{
		{"syntax error", `syntax = "proto3"; package openengine.v1; message Broken {`},
		{"duplicate field number", `syntax = "proto3"; package openengine.v1;
			message Dup { string a = 1; string b = 1; }`},
		{"unknown type", `syntax = "proto3"; package openengine.v1;
			message Ref { NoSuchMessage x = 1; }`},
		{"missing import", `syntax = "proto3"; package openengine.v1;
			import "openengine/v1/absent.proto";`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const path = "openengine/v1/malformed_test_input.proto"
			_, err := compileProtos(protoRoot, map[string]string{path: tc.src}, path)
			if err == nil {
				t.Fatal("malformed .proto compiled without error")
			}
		})
	}
}

// extensionField is one baton.encoder.v1 field added to an upstream message
// (WIRE.md, "Extension (ours)").
type extensionField struct {
	message protoreflect.FullName
	field   protoreflect.Name
	number  protoreflect.FieldNumber
	kind    protoreflect.Kind
	// typeName is the message type for message fields, "" otherwise.
	typeName protoreflect.FullName
	// oneof is the containing (real) oneof, "" when not in one.
	oneof protoreflect.Name
}

// wireExtensionFields are the extension fields and numbers WIRE.md gives.
var wireExtensionFields = []extensionField{
	{"openengine.v1.GenerateRequest", "encoder", 100, protoreflect.MessageKind, "openengine.v1.EncoderOptions", ""},
	{"openengine.v1.GenerateRequest", "decode_preparation", 101, protoreflect.BytesKind, "", ""},
	{"openengine.v1.GenerateResponse", "encoder_ready", 100, protoreflect.MessageKind, "openengine.v1.EncoderReady", "event"},
	{"openengine.v1.PrefillReady", "decode_preparation", 100, protoreflect.BytesKind, "", ""},
	{"openengine.v1.AbortRequest", "encoder_cache", 100, protoreflect.MessageKind, "openengine.v1.EncoderCacheRef", "target"},
	{"openengine.v1.ModelInfo", "encoder", 100, protoreflect.MessageKind, "openengine.v1.EncoderCapabilities", ""},
}

// TestExtensionFieldNumbers pins the baton.encoder.v1 field numbers of
// WIRE.md, and fails when a field numbered 100-199 is added to the package
// without being listed here (the extension range is WIRE.md's to assign).
func TestExtensionFieldNumbers(t *testing.T) {
	for _, tc := range wireExtensionFields {
		t.Run(string(tc.message)+"."+string(tc.field), func(t *testing.T) {
			d, err := protoregistry.GlobalFiles.FindDescriptorByName(tc.message)
			if err != nil {
				t.Fatalf("message %s: %v", tc.message, err)
			}
			md, ok := d.(protoreflect.MessageDescriptor)
			if !ok {
				t.Fatalf("%s is a %T, not a message", tc.message, d)
			}
			fd := md.Fields().ByName(tc.field)
			if fd == nil {
				t.Fatalf("field %s.%s missing", tc.message, tc.field)
			}
			if fd.Number() != tc.number {
				t.Errorf("field %s.%s has number %d, WIRE.md says %d", tc.message, tc.field, fd.Number(), tc.number)
			}
			if byNum := md.Fields().ByNumber(tc.number); byNum == nil || byNum.Name() != tc.field {
				t.Errorf("number %d of %s is not %s", tc.number, tc.message, tc.field)
			}
			if fd.Kind() != tc.kind {
				t.Errorf("field %s.%s is %v, want %v", tc.message, tc.field, fd.Kind(), tc.kind)
			}
			if fd.Cardinality() == protoreflect.Repeated {
				t.Errorf("field %s.%s is repeated, want singular", tc.message, tc.field)
			}
			if tc.typeName != "" && (fd.Message() == nil || fd.Message().FullName() != tc.typeName) {
				t.Errorf("field %s.%s has type %v, want %s", tc.message, tc.field, fd.Message(), tc.typeName)
			}
			var oneof protoreflect.Name
			if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
				oneof = od.Name()
			}
			if oneof != tc.oneof {
				t.Errorf("field %s.%s is in oneof %q, want %q", tc.message, tc.field, oneof, tc.oneof)
			}
		})
	}

	listed := make(map[string]bool, len(wireExtensionFields))
	for _, tc := range wireExtensionFields {
		listed[string(tc.message)+"."+string(tc.field)] = true
	}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		for i := 0; i < md.Fields().Len(); i++ {
			fd := md.Fields().Get(i)
			if fd.Number() >= 100 && !listed[string(fd.FullName())] {
				t.Errorf("field %s has number %d in the extension range 100-199 (or above) but is not one WIRE.md assigns",
					fd.FullName(), fd.Number())
			}
		}
		for i := 0; i < md.Messages().Len(); i++ {
			walk(md.Messages().Get(i))
		}
	}
	for _, f := range generatedFiles {
		for i := 0; i < f.Messages().Len(); i++ {
			walk(f.Messages().Get(i))
		}
	}
}
