// Command docidents checks that every Go identifier the docs name in
// backticks exists in the code: the inline code spans of docs/*.md and the
// backticked words of every doc.go. `make lint` and .ci/run run it
// (scripts/check-doc-identifiers.sh); it prints each identifier it cannot
// find, with its file and line, and exits 1 when there is one.
//
// What counts as a Go identifier (the whole span, after a leading `*`, `&`
// or `[]` and a trailing call `(...)` are stripped):
//
//   - a dotted name whose parts are identifiers, such as `store.Stage`,
//     `View.Checksum` or `node.Config.Now`, unless its last part is a file
//     extension (`put.go`, `catalog.db`);
//   - a single name in CamelCase (`Seal`, `ErrNotFound`) or camelCase with
//     an upper-case letter inside (`writeOwners`).
//
// Spans with spaces, slashes, dashes, `=`, `:` or quotes (commands, flags,
// paths, settings), snake_case names (JSON, metrics, proto fields alone) and
// ALL-CAPS words (RESP commands, gRPC codes in the wire's spelling) are not
// identifiers and are skipped, as are fenced code blocks.
//
// A name exists when the module declares it (in any Go file, tests and
// generated code included: a package-level name, a method, a struct field or
// an interface method, exported or not), when a package the module imports
// exports it (the standard library's and the dependencies' packages, found
// with go list), when a .proto file of the module declares it (message,
// enum, service, rpc, field: `PutBegin.eager`, `Cache.Topology`), or when
// the Python client defines it (class or def under python/). A dotted name
// is resolved part by part: a package then a name it declares (then a
// method or field of that type), or a type then a method or field of it.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	missing, err := run(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docidents:", err)
		os.Exit(2)
	}
	for _, m := range missing {
		fmt.Println(m)
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "docidents: %d identifier(s) named in the docs do not exist in the code\n", len(missing))
		os.Exit(1)
	}
}

// run checks the docs under root and returns one line per identifier not
// found ("file:line: `name` ...").
func run(root string) ([]string, error) {
	ix := newIndex()
	if err := ix.addModule(root); err != nil {
		return nil, err
	}
	if err := ix.addProto(root); err != nil {
		return nil, err
	}
	if err := ix.addPython(root); err != nil {
		return nil, err
	}
	if err := ix.addManifests(root); err != nil {
		return nil, err
	}
	for _, n := range notInTheCode {
		ix.names[n] = true
	}
	for n := range ix.names {
		ix.local[n] = true
	}
	if err := ix.addDeps(root); err != nil {
		return nil, err
	}
	docs, err := docFiles(root)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, f := range docs {
		spans, err := backticked(f)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, f)
		for _, sp := range spans {
			name, ok := identifier(sp.text)
			if !ok || ix.exists(name) {
				continue
			}
			missing = append(missing, fmt.Sprintf("%s:%d: `%s` is not declared in the code", rel, sp.line, sp.text))
		}
	}
	return missing, nil
}

// index is every name the docs may refer to.
type index struct {
	// names: every declared name, any kind, any package.
	names map[string]bool
	// pkgs: package name -> the names it declares at package level.
	pkgs map[string]map[string]bool
	// members: type (or proto message/service) name -> its methods and fields.
	members map[string]map[string]bool
	// fieldTypes: "Type.Field" -> the name of the field's type; fields:
	// field name -> the names of its types, over every struct.
	fieldTypes map[string]string
	fields     map[string]map[string]bool
	// local: names the module (its Go, proto, Python and manifests)
	// declares; a name alone must be one of them.
	local map[string]bool
}

func newIndex() *index {
	return &index{names: map[string]bool{}, pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{},
		fieldTypes: map[string]string{}, fields: map[string]map[string]bool{}, local: map[string]bool{}}
}

func (ix *index) addPkgName(pkg, name string) {
	if ix.pkgs[pkg] == nil {
		ix.pkgs[pkg] = map[string]bool{}
	}
	ix.pkgs[pkg][name] = true
	ix.names[name] = true
}

func (ix *index) addMember(typ, name string) {
	if ix.members[typ] == nil {
		ix.members[typ] = map[string]bool{}
	}
	ix.members[typ][name] = true
	ix.names[name] = true
}

// addModule indexes every Go file under root (tests and generated code
// included), skipping hidden directories, testdata and vendor.
func (ix *index) addModule(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		return ix.addGoFile(path, false)
	})
}

// addGoFile indexes one Go file: every package-level name, method, field and
// interface method, or only the exported ones.
func (ix *index) addGoFile(path string, exportedOnly bool) error {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return fmt.Errorf("cannot parse %s: %w", path, err)
	}
	pkg := f.Name.Name
	keep := func(id *ast.Ident) bool { return id != nil && id.Name != "_" && (!exportedOnly || id.IsExported()) }
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !keep(d.Name) {
				continue
			}
			if d.Recv == nil || len(d.Recv.List) == 0 {
				ix.addPkgName(pkg, d.Name.Name)
				continue
			}
			if t := recvType(d.Recv.List[0].Type); t != "" {
				ix.addMember(t, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !keep(s.Name) {
						continue
					}
					ix.addPkgName(pkg, s.Name.Name)
					ix.addTypeMembers(s.Name.Name, s.Type, keep)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if keep(n) {
							ix.addPkgName(pkg, n.Name)
						}
					}
				}
			}
		}
	}
	return nil
}

// addTypeMembers indexes the fields of a struct type and the methods of an
// interface type (embedded ones under their type's name).
func (ix *index) addTypeMembers(typ string, expr ast.Expr, keep func(*ast.Ident) bool) {
	var fields *ast.FieldList
	switch t := expr.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, fl := range fields.List {
		if len(fl.Names) == 0 {
			if n := recvType(fl.Type); n != "" {
				ix.addMember(typ, n)
			}
			continue
		}
		ft := recvType(fl.Type)
		for _, n := range fl.Names {
			if !keep(n) {
				continue
			}
			ix.addMember(typ, n.Name)
			if ft != "" {
				ix.fieldTypes[typ+"."+n.Name] = ft
				if ix.fields[n.Name] == nil {
					ix.fields[n.Name] = map[string]bool{}
				}
				ix.fields[n.Name][ft] = true
			}
		}
	}
}

// recvType is the type name of a receiver or embedded field: T, *T, T[P],
// pkg.T.
func recvType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.SelectorExpr:
			return t.Sel.Name
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// addDeps indexes the exported names of every package the module's
// packages import, directly or not, the standard library included.
func (ix *index) addDeps(root string) error {
	cmd := exec.Command("go", "list", "-deps", "-test", "-json=Name,ImportPath,Dir,GoFiles,Module,Standard", "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("cannot list the module's dependencies: %w", err)
	}
	type pkg struct {
		Name, ImportPath, Dir string
		GoFiles               []string
		Standard              bool
		Module                *struct{ Main bool }
	}
	seen := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("cannot read go list's output: %w", err)
		}
		if seen[p.Dir] || p.Dir == "" || (p.Module != nil && p.Module.Main) {
			continue
		}
		seen[p.Dir] = true
		for _, f := range p.GoFiles {
			if err := ix.addGoFile(filepath.Join(p.Dir, f), true); err != nil {
				return err
			}
		}
		// A package is also known by the last element of its import
		// path (a dependency's docs write `memberlist.Config`).
		if last := filepath.Base(p.ImportPath); last != p.Name {
			for n := range ix.pkgs[p.Name] {
				ix.addPkgName(last, n)
			}
		}
	}
	return nil
}

var (
	protoDecl  = regexp.MustCompile(`^\s*(message|enum|service)\s+([A-Za-z_][A-Za-z0-9_]*)`)
	protoRPC   = regexp.MustCompile(`^\s*rpc\s+([A-Za-z_][A-Za-z0-9_]*)`)
	protoField = regexp.MustCompile(`^\s*(?:repeated\s+|optional\s+)?[A-Za-z_][A-Za-z0-9_.]*(?:<[^>]*>)?\s+([A-Za-z_][A-Za-z0-9_]*)\s*=\s*\d+`)
	protoValue = regexp.MustCompile(`^\s*([A-Z][A-Z0-9_]*)\s*=\s*\d+`)
)

// addProto indexes the messages, enums, services, rpcs and fields of the
// module's .proto files; a field is a member of the innermost message that
// encloses it.
func (ix *index) addProto(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".proto") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		var stack []string // enclosing declarations, by brace depth
		depth := 0
		opened := map[int]string{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.Index(line, "//"); i >= 0 {
				line = line[:i]
			}
			cur := ""
			if len(stack) > 0 {
				cur = stack[len(stack)-1]
			}
			switch {
			case protoDecl.MatchString(line):
				n := protoDecl.FindStringSubmatch(line)[2]
				ix.names[n] = true
				if cur != "" {
					ix.addMember(cur, n)
				}
				opened[depth+strings.Count(line, "{")] = n
			case protoRPC.MatchString(line):
				ix.addMember(cur, protoRPC.FindStringSubmatch(line)[1])
			case protoValue.MatchString(line):
				ix.addMember(cur, protoValue.FindStringSubmatch(line)[1])
			case protoField.MatchString(line):
				ix.addMember(cur, protoField.FindStringSubmatch(line)[1])
			}
			for range strings.Count(line, "{") {
				depth++
				if n, ok := opened[depth]; ok {
					stack = append(stack, n)
					delete(opened, depth)
				} else {
					stack = append(stack, cur)
				}
			}
			for range strings.Count(line, "}") {
				depth--
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
			}
		}
		return sc.Err()
	})
}

var pyDecl = regexp.MustCompile(`^\s*(?:class|def|async def)\s+([A-Za-z_][A-Za-z0-9_]*)`)

// addPython indexes the classes and functions of the Python client
// (python/), which the docs name alongside the Go SDK's.
func (ix *index) addPython(root string) error {
	dir := filepath.Join(root, "python")
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".py") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if m := pyDecl.FindStringSubmatch(line); m != nil {
				ix.names[m[1]] = true
			}
		}
		return nil
	})
}

var yamlWord = regexp.MustCompile(`[A-Za-z][A-Za-z0-9]*`)

// addManifests indexes every word of the deployment's YAML files (deploy/):
// the Kubernetes fields (`emptyDir`) and alert names the docs cite.
func (ix *index) addManifests(root string) error {
	dir := filepath.Join(root, "deploy")
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, w := range yamlWord.FindAllString(string(b), -1) {
			ix.names[w] = true
		}
		return nil
	})
}

// notInTheCode are names the docs may put in backticks that are not
// kvring's: units, and other projects' APIs the docs compare with.
var notInTheCode = []string{
	"KiB", "MiB", "GiB", "TiB", // sizes (docs/configuration.md)
	"RedisCluster", // redis-py's cluster client (docs/resp.md)
}

// protoPackages are the proto package prefixes of fully qualified message
// names (`google.rpc.ErrorInfo`); the name after them is checked.
var protoPackages = []string{"google.rpc.", "google.protobuf.", "kvring.v1."}

// exists reports whether a name the docs use is declared.
func (ix *index) exists(name string) bool {
	for _, p := range protoPackages {
		if rest, ok := strings.CutPrefix(name, p); ok {
			if !strings.Contains(rest, ".") {
				return ix.names[rest] // a message of the module or of a dependency (errdetails)
			}
			name = rest
		}
	}
	parts := strings.Split(name, ".")
	if len(parts) == 1 {
		return ix.local[name]
	}
	// A package, then a name in it, then members.
	if decls, ok := ix.pkgs[parts[0]]; ok && decls[parts[1]] && ix.memberChain(parts[1], parts[2:]) {
		return true
	}
	// A type (or proto message/service), then its members.
	if ix.memberChain(parts[0], parts[1:]) {
		return true
	}
	// A struct field (`Spread.Threshold`), then members of its type.
	for t := range ix.fields[parts[0]] {
		if ix.memberChain(t, parts[1:]) {
			return true
		}
	}
	return false
}

// memberChain reports whether typ has the member rest[0], whose type (when
// it is a field) has rest[1], and so on. An empty rest is true.
func (ix *index) memberChain(typ string, rest []string) bool {
	if len(rest) == 0 {
		return true
	}
	if !ix.members[typ][rest[0]] {
		return false
	}
	if len(rest) == 1 {
		return true
	}
	ft, ok := ix.fieldTypes[typ+"."+rest[0]]
	return ok && ix.memberChain(ft, rest[1:])
}

var (
	identRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	camelRe  = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$`)
	lowerCam = regexp.MustCompile(`^[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*$`)
	callRe   = regexp.MustCompile(`\([^()]*\)$`)
)

// fileExts are last parts of a dotted span that make it a file name.
var fileExts = []string{"go", "md", "db", "sock", "seg", "proto", "py", "sh", "yaml", "yml", "json", "txt", "toml",
	"mod", "sum", "service", "conf", "lock", "whl", "pem", "key", "crt", "csv", "gz", "tar", "html", "log", "pb", "so",
	"com", "io", "org", "net", "local", "svc", "cluster", "internal", "corrupt"}

// identifier returns the Go identifier a code span names, if it names one.
func identifier(span string) (string, bool) {
	s := strings.TrimSpace(span)
	s = strings.TrimLeft(s, "*&")
	s = strings.TrimPrefix(s, "[]")
	for callRe.MatchString(s) {
		s = callRe.ReplaceAllString(s, "")
	}
	if !identRe.MatchString(s) {
		return "", false
	}
	parts := strings.Split(s, ".")
	if len(parts) > 1 {
		if slices.Contains(fileExts, strings.ToLower(parts[len(parts)-1])) {
			return "", false
		}
		for _, p := range parts {
			if p == "" || strings.Contains(p, "_") && strings.ToUpper(p) != p && strings.ToLower(p) != p {
				return "", false
			}
		}
		// Dotted snake_case or all-lower names (metric labels, hosts,
		// proto packages like kvring.v1) are not Go identifiers unless
		// some part is mixed case.
		mixed := false
		for _, p := range parts {
			if camelRe.MatchString(p) || lowerCam.MatchString(p) {
				mixed = true
			}
		}
		if !mixed {
			return "", false
		}
		return s, true
	}
	if camelRe.MatchString(s) || lowerCam.MatchString(s) {
		return s, true
	}
	return "", false
}

// docFiles lists docs/*.md and every doc.go under root.
func docFiles(root string) ([]string, error) {
	md, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	var gos []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "doc.go" {
			gos = append(gos, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := append(md, gos...)
	sort.Strings(out)
	return out, nil
}

type span struct {
	text string
	line int
}

// backticked returns the inline code spans of a file, outside fenced code
// blocks (``` or ~~~), each with the line it starts on. A span does not
// cross a line.
func backticked(path string) ([]span, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []span
	fenced := false
	for i, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "//"))
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for {
			a := strings.IndexByte(line, '`')
			if a < 0 {
				break
			}
			// A run of n backticks opens a span closed by the next run of n.
			n := 1
			for a+n < len(line) && line[a+n] == '`' {
				n++
			}
			rest := line[a+n:]
			z := strings.Index(rest, strings.Repeat("`", n))
			if z < 0 {
				break
			}
			out = append(out, span{text: rest[:z], line: i + 1})
			line = rest[z+n:]
		}
	}
	return out, nil
}
