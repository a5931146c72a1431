// Command funclen lists the functions (and methods and function literals
// assigned at top level) longer than a limit, in lines from the func
// keyword to the closing brace, in the Go files under the given
// directories (tests and generated files excluded). It exits 1 when it
// lists any.
//
//	go run ./scripts/funclen -max 80 node client store
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
	limit := flag.Int("max", 80, "the longest a function may be, in lines")
	flag.Parse()
	type long struct {
		where string
		lines int
	}
	var found []long
	fset := token.NewFileSet()
	for _, dir := range flag.Args() {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			if ast.IsGenerated(f) {
				return nil
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
				if n := end.Line - start.Line + 1; n > *limit {
					name := fn.Name.Name
					if fn.Recv != nil && len(fn.Recv.List) > 0 {
						name = fmt.Sprintf("(%s).%s", recvName(fn.Recv.List[0].Type), name)
					}
					found = append(found, long{fmt.Sprintf("%s:%d %s", path, start.Line, name), n})
				}
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "funclen:", err)
			os.Exit(2)
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].lines > found[j].lines })
	for _, l := range found {
		fmt.Printf("%4d %s\n", l.lines, l.where)
	}
	if len(found) > 0 {
		os.Exit(1)
	}
}

// recvName is the type name of a method's receiver.
func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}
