package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// layerFiles reads an image's only layer into name -> header and content.
func layerFiles(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want exactly one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	headers, data := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		headers[h.Name], data[h.Name] = h, b
	}
	return headers, data
}

// TestBuildIsReproducible builds one image twice from the same inputs, with
// the files' own times changed in between, and wants identical archives.
func TestBuildIsReproducible(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "app")
	if err := os.WriteFile(bin, []byte("not really a binary"), 0o700); err != nil {
		t.Fatal(err)
	}
	build := func(out string) []byte {
		t.Helper()
		o := options{
			out: out, tags: stringList{"example.test/app:1"}, files: stringList{"/app=" + bin + ":0755", "/etc/ssl/x.pem=" + bin},
			nonroot: 65532, entrypoint: "/app", created: "1700000000", platform: "linux/amd64", workdir: "/",
			labels: stringList{"org.opencontainers.image.revision=abc"},
		}
		if err := run(o); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := build(filepath.Join(dir, "a.tar"))
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(bin, later, later); err != nil {
		t.Fatal(err)
	}
	if second := build(filepath.Join(dir, "b.tar")); !bytes.Equal(first, second) {
		t.Fatal("two builds of the same inputs differ")
	}

	img, err := tarball.ImageFromPath(filepath.Join(dir, "a.tar"), nil)
	if err != nil {
		t.Fatal(err)
	}
	headers, _ := layerFiles(t, img)
	for _, want := range []struct {
		name string
		mode int64
	}{{"app", 0o755}, {"etc/", 0o755}, {"etc/ssl/", 0o755}, {"etc/ssl/x.pem", 0o700}, {"etc/passwd", 0o644}, {"etc/group", 0o644}} {
		h, ok := headers[want.name]
		if !ok {
			t.Errorf("layer lacks %s", want.name)
			continue
		}
		if h.Mode != want.mode || h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(time.Unix(1700000000, 0)) {
			t.Errorf("%s: mode %o uid %d gid %d time %v; want mode %o, root, the --created time", want.name, h.Mode, h.Uid, h.Gid, h.ModTime, want.mode)
		}
	}
}

func TestBadArguments(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]options{
		"no tag":        {out: filepath.Join(dir, "x.tar"), files: stringList{"/a=" + dir}},
		"relative dest": {out: filepath.Join(dir, "x.tar"), tags: stringList{"a:1"}, files: stringList{"a=/etc/hostname"}},
		"bad mode":      {out: filepath.Join(dir, "x.tar"), tags: stringList{"a:1"}, files: stringList{"/a=/etc/hostname:99"}},
		"missing file":  {out: filepath.Join(dir, "x.tar"), tags: stringList{"a:1"}, files: stringList{"/a=" + filepath.Join(dir, "nope")}},
		"bad created":   {out: filepath.Join(dir, "x.tar"), tags: stringList{"a:1"}, files: stringList{"/a=/etc/hostname"}, created: "yesterday", platform: "linux/amd64"},
		"bad tag":       {out: filepath.Join(dir, "x.tar"), tags: stringList{"UPPER/case:1"}, files: stringList{"/a=/etc/hostname"}, platform: "linux/amd64"},
	} {
		if err := run(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.tar")); err == nil {
		t.Error("a failed build left an archive behind")
	}
}

// TestFaucetImage checks the archive `make image` wrote (make test-image
// passes its path): the layout the chart and the operator rely on.
func TestFaucetImage(t *testing.T) {
	archive, ref := os.Getenv("IMAGE_ARCHIVE"), os.Getenv("IMAGE_REF")
	if archive == "" || ref == "" {
		t.Skip("IMAGE_ARCHIVE and IMAGE_REF are set by `make test-image`")
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		t.Fatalf("the archive has no image tagged %s: %v", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user = %q; want the numeric non-root 65532:65532 (runAsNonRoot needs a number)", c.User)
	}
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/faucet" || strings.Join(c.Cmd, " ") != "manager" {
		t.Errorf("entrypoint %q cmd %q; want [/faucet] [manager]", c.Entrypoint, c.Cmd)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	for _, l := range []string{"source", "version", "revision", "licenses", "created"} {
		if c.Labels["org.opencontainers.image."+l] == "" {
			t.Errorf("label org.opencontainers.image.%s is missing", l)
		}
	}
	if rev := c.Labels["org.opencontainers.image.revision"]; len(rev) != 40 {
		t.Errorf("revision label %q is not a full commit id", rev)
	}

	headers, data := layerFiles(t, img)
	for n, h := range headers {
		if h.Mode&0o002 != 0 {
			t.Errorf("%s is world-writable (mode %o)", n, h.Mode)
		}
		if n == "tmp/" || strings.HasPrefix(n, "tmp/") {
			t.Errorf("the image has %s: /tmp is writable only where a pod mounts one", n)
		}
	}
	// /faucet, and btcd beside it for `faucet devnet --btc-listen`: both
	// static, as the image has no libc.
	for _, name := range []string{"faucet", "btcd"} {
		checkStaticExecutable(t, name, headers[name], data[name])
	}
	if !bytes.Contains(data["etc/ssl/certs/ca-certificates.crt"], []byte("-----BEGIN CERTIFICATE-----")) {
		t.Error("no CA certificates at /etc/ssl/certs/ca-certificates.crt")
	}
	if !bytes.Contains(data["etc/passwd"], []byte(":65532:65532:")) {
		t.Error("/etc/passwd does not name 65532")
	}
}

// checkStaticExecutable wants /name executable (0755) and a statically
// linked ELF binary.
func checkStaticExecutable(t *testing.T, name string, h *tar.Header, bin []byte) {
	t.Helper()
	if h == nil || h.Mode != 0o755 {
		t.Errorf("the image has no executable /%s", name)
		return
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Errorf("/%s is not an ELF binary: %v", name, err)
		return
	}
	if f.Machine != elf.EM_X86_64 {
		t.Errorf("/%s is for %v, want x86-64 (the image is linux/amd64)", name, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("/%s is dynamically linked (program header %v); the image has no libc", name, p.Type)
			return
		}
	}
}
