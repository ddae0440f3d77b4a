// Command sizecheck keeps the code readable by a newcomer: it fails when a
// non-test, non-generated Go file outside api/ and hack/ is over -max-file
// lines, when a function there is over -max-func lines, or when a type
// declared in server/ (outside the simulated node), controllers/ or cmd/ has
// over -max-methods methods. `make verify-size` runs it on the repository.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	maxFile := flag.Int("max-file", 600, "most lines in a file")
	maxFunc := flag.Int("max-func", 100, "most lines in a function")
	maxMethods := flag.Int("max-methods", 40, "most methods of a type")
	report := flag.Bool("report", false, "print the largest files, functions and types even when within the limits")
	flag.Parse()
	root := "."
	if flag.NArg() > 0 {
		root = flag.Arg(0)
	}
	problems, err := check(root, limits{*maxFile, *maxFunc, *maxMethods}, *report)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sizecheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("sizecheck: %d over the limits (files %d lines, functions %d lines, types %d methods)\n",
			len(problems), *maxFile, *maxFunc, *maxMethods)
		os.Exit(1)
	}
}

type limits struct{ file, fn, methods int }

// skipped are the trees the limits do not apply to: API types and their
// generated code, build tooling, and vendored or installed packages.
func skipped(rel string) bool {
	for _, p := range []string{"api/", "hack/", "bin/", ".git/"} {
		if strings.HasPrefix(rel, p) {
			return true
		}
	}
	return strings.Contains(rel, "node_modules/") || strings.Contains(rel, "/testdata/")
}

// methodsCounted reports whether a package's types are held to the method
// limit: the server (but for its simulated node), the controllers and cmd.
func methodsCounted(dir string) bool {
	if strings.HasPrefix(dir, "server/chain/devnode") {
		return false
	}
	return dir == "server" || strings.HasPrefix(dir, "server/") || strings.HasPrefix(dir, "controllers") || strings.HasPrefix(dir, "cmd/")
}

func check(root string, lim limits, report bool) ([]string, error) {
	var problems []string
	methods := map[string]int{} // "dir.Type" → methods
	type sized struct {
		name  string
		lines int
	}
	var files, funcs []sized
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipped(rel+"/") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || skipped(rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		n := fset.Position(f.End()).Line
		files = append(files, sized{rel, n})
		if n > lim.file {
			problems = append(problems, fmt.Sprintf("%s: %d lines (limit %d)", rel, n, lim.file))
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				recv := receiverType(fd.Recv.List[0].Type)
				name = recv + "." + name
				if methodsCounted(dir) {
					methods[dir+"."+recv]++
				}
			}
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			funcs = append(funcs, sized{rel + ": " + name, lines})
			if lines > lim.fn {
				problems = append(problems, fmt.Sprintf("%s: func %s: %d lines (limit %d)", rel, name, lines, lim.fn))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var types []sized
	for t, n := range methods {
		types = append(types, sized{t, n})
		if n > lim.methods {
			problems = append(problems, fmt.Sprintf("%s: %d methods (limit %d)", t, n, lim.methods))
		}
	}
	sort.Strings(problems)
	if report {
		for _, set := range []struct {
			what string
			s    []sized
		}{{"files (lines)", files}, {"functions (lines)", funcs}, {"types (methods)", types}} {
			sort.Slice(set.s, func(i, j int) bool { return set.s[i].lines > set.s[j].lines })
			fmt.Printf("largest %s:\n", set.what)
			for _, x := range set.s[:min(8, len(set.s))] {
				fmt.Printf("  %5d  %s\n", x.lines, x.name)
			}
		}
	}
	return problems, nil
}

func receiverType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return receiverType(t.X)
	case *ast.IndexExpr:
		return receiverType(t.X)
	case *ast.IndexListExpr:
		return receiverType(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
