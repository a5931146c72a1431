// Command funclen lists the functions, methods and function literals
// (closures, wherever they are) longer than a limit, in lines from the func
// keyword to the closing brace, in the Go files under the given directories
// (tests, generated files and vendored or testdata trees excluded). A
// closure counts on its own and within the function that holds it. It
// exits 1 when it lists any.
//
//	go run ./scripts/funclen -max 80 .
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

// long is a function over the limit.
type long struct {
	where string
	lines int
}

func main() {
	limit := flag.Int("max", 80, "the longest a function may be, in lines")
	flag.Parse()
	var found []long
	fset := token.NewFileSet()
	for _, dir := range flag.Args() {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if n := d.Name(); path != dir && (n == "testdata" || n == "vendor" || strings.HasPrefix(n, ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			longs, err := fileLongs(fset, path, *limit)
			found = append(found, longs...)
			return err
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

// fileLongs lists the functions and closures of one file over limit lines
// (none for a generated file).
func fileLongs(fset *token.FileSet, path string, limit int) ([]long, error) {
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil || ast.IsGenerated(f) {
		return nil, err
	}
	var found []long
	check := func(n ast.Node, name string) {
		start, end := fset.Position(n.Pos()), fset.Position(n.End())
		if lines := end.Line - start.Line + 1; lines > limit {
			found = append(found, long{fmt.Sprintf("%s:%d %s", path, start.Line, name), lines})
		}
	}
	for _, decl := range f.Decls {
		outer := "(top level)"
		if fn, ok := decl.(*ast.FuncDecl); ok {
			if fn.Body == nil {
				continue
			}
			outer = fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) > 0 {
				outer = fmt.Sprintf("(%s).%s", recvName(fn.Recv.List[0].Type), outer)
			}
			check(fn, outer)
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			if lit, ok := n.(*ast.FuncLit); ok {
				check(lit, "a closure in "+outer)
			}
			return true
		})
	}
	return found, nil
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
