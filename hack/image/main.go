// Command image writes a single-layer container image of static files as a
// docker-archive tarball (what `docker save` writes), without a daemon:
// `ctr images import`, `docker load`, `podman load` and
// `kind load image-archive` all read it. It is how `make image` packages the
// faucet binary, and how the cluster tests package their pause image.
//
// The image is reproducible: every file's mode, owner and time are fixed
// (the time is --created, SOURCE_DATE_EPOCH by convention), entries are
// sorted, and the archive's own entries carry no time, so the same inputs
// give the same bytes and the same digest.
//
//	image --out bin/faucet-image.tar --tag ghcr.io/stxfaucet/faucet-operator:0.1.0 \
//	  --file /faucet=bin/linux_amd64/faucet:0755 \
//	  --file /etc/ssl/certs/ca-certificates.crt=/etc/ssl/certs/ca-certificates.crt \
//	  --nonroot 65532 --entrypoint /faucet --cmd manager --label org.opencontainers.image.revision=abc
//
// It prints the image's manifest digest and its config digest (the image ID
// docker and crictl show) on stdout.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// entry is one file of the layer.
type entry struct {
	dest string // absolute path in the image
	data []byte
	mode int64
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type options struct {
	out, entrypoint, workdir, created, platform string
	cmd, tags, files, labels, env, ports        stringList
	nonroot                                     int
}

func main() {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.out, "out", "", "the archive to write (required)")
	fs.Var(&o.tags, "tag", "a name the archive gives the image, e.g. ghcr.io/org/faucet:0.1.0 (repeatable, at least one)")
	fs.Var(&o.files, "file", "DEST=SRC[:MODE]: copy SRC to DEST in the image; MODE is octal, default SRC's permission bits (repeatable)")
	fs.IntVar(&o.nonroot, "nonroot", 0, "add /etc/passwd and /etc/group naming this uid and gid 'nonroot', and run as it (0: run as root)")
	fs.StringVar(&o.entrypoint, "entrypoint", "", "the entrypoint, a path in the image")
	fs.Var(&o.cmd, "cmd", "the default arguments of the entrypoint (repeatable, in order)")
	fs.StringVar(&o.workdir, "workdir", "/", "the working directory")
	fs.Var(&o.labels, "label", "KEY=VALUE: an image label (repeatable)")
	fs.Var(&o.env, "env", "KEY=VALUE: an environment variable (repeatable)")
	fs.Var(&o.ports, "expose", "PORT/PROTO: a port the image documents as exposed (repeatable)")
	fs.StringVar(&o.created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "the image's creation time, seconds since the epoch (default $SOURCE_DATE_EPOCH, else 0)")
	fs.StringVar(&o.platform, "platform", "linux/amd64", "OS/ARCH of the binaries")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.out == "" || len(o.tags) == 0 || len(o.files) == 0 {
		return errors.New("--out, --tag and --file are required")
	}
	created := time.Unix(0, 0).UTC()
	if o.created != "" {
		sec, err := strconv.ParseInt(o.created, 10, 64)
		if err != nil {
			return fmt.Errorf("--created %q: want seconds since the epoch: %w", o.created, err)
		}
		created = time.Unix(sec, 0).UTC()
	}
	osName, arch, ok := strings.Cut(o.platform, "/")
	if !ok {
		return fmt.Errorf("--platform %q: want OS/ARCH", o.platform)
	}

	entries, err := readFiles(o.files)
	if err != nil {
		return err
	}
	user := "0:0"
	if o.nonroot != 0 {
		id := strconv.Itoa(o.nonroot)
		user = id + ":" + id
		entries = append(entries,
			entry{dest: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + id + ":" + id + ":nonroot:/home/nonroot:/sbin/nologin\n")},
			entry{dest: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:" + id + ":\n")},
		)
	}
	layerTar, err := layerBytes(entries, created)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}

	labels, err := keyValues(o.labels, "--label")
	if err != nil {
		return err
	}
	cfg := v1.Config{
		User:       user,
		WorkingDir: o.workdir,
		Env:        append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, o.env...),
		Labels:     labels,
		Cmd:        o.cmd,
	}
	if o.entrypoint != "" {
		cfg.Entrypoint = []string{o.entrypoint}
	}
	if len(o.ports) > 0 {
		cfg.ExposedPorts = map[string]struct{}{}
		for _, p := range o.ports {
			cfg.ExposedPorts[p] = struct{}{}
		}
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "hack/image", Comment: "static files"},
	})
	if err != nil {
		return fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Config = cfg
	cf.OS, cf.Architecture = osName, arch
	cf.Created = v1.Time{Time: created}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return fmt.Errorf("config: %w", err)
	}

	refs := map[name.Reference]v1.Image{}
	for _, t := range o.tags {
		ref, err := name.NewTag(t, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("--tag %q: %w", t, err)
		}
		refs[ref] = img
	}
	if err := os.MkdirAll(path.Dir(o.out), 0o755); err != nil {
		return err
	}
	tmp := o.out + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refs); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	if err := os.Rename(tmp, o.out); err != nil { // never a half-written archive
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return err
	}
	fmt.Printf("digest %s\nid %s\n", digest, configDigest)
	return nil
}

// readFiles reads every --file DEST=SRC[:MODE].
func readFiles(specs []string) ([]entry, error) {
	var out []entry
	seen := map[string]bool{}
	for _, spec := range specs {
		dest, src, ok := strings.Cut(spec, "=")
		if !ok || !path.IsAbs(dest) || src == "" {
			return nil, fmt.Errorf("--file %q: want /DEST=SRC[:MODE]", spec)
		}
		dest = path.Clean(dest)
		mode := int64(-1)
		if i := strings.LastIndexByte(src, ':'); i >= 0 {
			m, err := strconv.ParseInt(src[i+1:], 8, 32)
			if err != nil {
				return nil, fmt.Errorf("--file %q: mode %q is not octal: %w", spec, src[i+1:], err)
			}
			mode, src = m, src[:i]
		}
		if seen[dest] {
			return nil, fmt.Errorf("--file %q: %s given twice", spec, dest)
		}
		seen[dest] = true
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("--file %q: %w", spec, err)
		}
		if mode < 0 {
			st, err := os.Stat(src)
			if err != nil {
				return nil, err
			}
			mode = int64(st.Mode().Perm())
		}
		out = append(out, entry{dest: dest, data: data, mode: mode})
	}
	return out, nil
}

// layerBytes is the uncompressed layer: every file and its parent
// directories, sorted, owned by root, stamped with created.
func layerBytes(entries []entry, created time.Time) ([]byte, error) {
	dirs := map[string]bool{}
	for _, e := range entries {
		for d := path.Dir(e.dest); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	type item struct {
		name string
		e    *entry
	}
	var items []item
	for d := range dirs {
		items = append(items, item{name: strings.TrimPrefix(d, "/") + "/"})
	}
	for i := range entries {
		items = append(items, item{name: strings.TrimPrefix(entries[i].dest, "/"), e: &entries[i]})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].name < items[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, it := range items {
		h := &tar.Header{Name: it.name, ModTime: created}
		if it.e == nil {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		} else {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, it.e.mode, int64(len(it.e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", it.name, err)
		}
		if it.e != nil {
			if _, err := tw.Write(it.e.data); err != nil {
				return nil, fmt.Errorf("layer %s: %w", it.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func keyValues(kvs []string, flagName string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flagName, kv)
		}
		m[k] = v
	}
	return m, nil
}
