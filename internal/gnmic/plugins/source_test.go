package plugins

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// This file reads gNMIc's plugin packages with go/ast, so the committed key table is checked against gNMIc's own
// config structs rather than against a second hand-written list. Every output plugin (pkg/outputs/...) and every
// event processor (pkg/formatters/event_*) registers itself with <registry>.Register(name, ...) and decodes its
// config map with <registry>.DecodeConfig(cfg, dst) (mapstructure plus the duration hook); the wire keys are
// the mapstructure tags of dst's struct type.

// srcPackage is one parsed Go package of gNMIc.
type srcPackage struct {
	dir    string
	files  []*ast.File
	consts map[string]string   // package-level string constants, e.g. processorType
	types  map[string]ast.Expr // type name → its definition
}

// readPlugins parses every package under root and returns the config keys of each plugin registered with
// registry ("outputs" or "formatters"), by type name.
func readPlugins(root, registry string) (map[string]Keys, error) {
	pkgs, err := parseTree(root)
	if err != nil {
		return nil, err
	}
	found := map[string]Keys{}
	for _, pkg := range pkgs {
		names, targets, err := pkg.registrations(registry)
		if err != nil {
			return nil, err
		}
		if len(names) == 0 && len(targets) == 0 {
			continue
		}
		// One package, one plugin: more than one decode target would leave it open which struct a name uses.
		if len(names) != 1 || len(targets) != 1 {
			return nil, fmt.Errorf("%s: want one registered name and one config struct, found names %v and structs %v",
				pkg.dir, names, targets)
		}
		keys, err := pkg.keysOf(targets[0], 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pkg.dir, err)
		}
		if _, dup := found[names[0]]; dup {
			return nil, fmt.Errorf("%s: %q registered twice", pkg.dir, names[0])
		}
		found[names[0]] = keys
	}
	return found, nil
}

func parseTree(root string) ([]*srcPackage, error) {
	byDir := map[string]*srcPackage{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		pkg := byDir[dir]
		if pkg == nil {
			pkg = &srcPackage{dir: dir, consts: map[string]string{}, types: map[string]ast.Expr{}}
			byDir[dir] = pkg
		}
		pkg.add(f)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []*srcPackage
	for _, p := range byDir {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *srcPackage) int { return strings.Compare(a.dir, b.dir) })
	return out, nil
}

func (p *srcPackage) add(f *ast.File) {
	p.files = append(p.files, f)
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				p.types[s.Name.Name] = s.Type
			case *ast.ValueSpec:
				for i, name := range s.Names {
					if gd.Tok != token.CONST || i >= len(s.Values) {
						continue
					}
					if lit, ok := s.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						p.consts[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
}

// registrations returns the names the package registers and the config struct types its DecodeConfig calls
// decode into, both sorted and without repeats.
func (p *srcPackage) registrations(registry string) (names, targets []string, err error) {
	for _, f := range p.files {
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || err != nil {
					return err == nil
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != registry {
					return true
				}
				switch {
				case sel.Sel.Name == "Register" && len(call.Args) == 2:
					// gNMIc's plugin manager registers binaries found at run time under variable names; those
					// are not built-in types, so only constant names count.
					if name, ok := p.stringValue(call.Args[0]); ok {
						names = append(names, name)
					}
				case sel.Sel.Name == "DecodeConfig" && len(call.Args) == 2:
					var typ string
					if typ, err = p.decodeTarget(fd, call.Args[1]); err != nil {
						err = fmt.Errorf("%s: %s: %w", p.dir, fd.Name.Name, err)
					}
					targets = append(targets, typ)
				}
				return true
			})
		}
	}
	slices.Sort(names)
	slices.Sort(targets)
	return slices.Compact(names), slices.Compact(targets), err
}

func (p *srcPackage) stringValue(e ast.Expr) (string, bool) {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind == token.STRING {
			s, err := strconv.Unquote(v.Value)
			return s, err == nil
		}
	case *ast.Ident:
		s, ok := p.consts[v.Name]
		return s, ok
	}
	return "", false
}

// decodeTarget names the struct type DecodeConfig's destination has inside fd: the receiver itself, a field of
// the receiver (k.cfg), or a local variable made by new(T), &T{} or var x T.
func (p *srcPackage) decodeTarget(fd *ast.FuncDecl, dst ast.Expr) (string, error) {
	if u, ok := dst.(*ast.UnaryExpr); ok && u.Op == token.AND {
		dst = u.X
	}
	recvName, recvType := "", ""
	if fd.Recv != nil && len(fd.Recv.List) == 1 && len(fd.Recv.List[0].Names) == 1 {
		recvName, recvType = fd.Recv.List[0].Names[0].Name, typeName(fd.Recv.List[0].Type)
	}
	switch d := dst.(type) {
	case *ast.Ident:
		if d.Name == recvName {
			return recvType, nil
		}
		if t := localType(fd.Body, d.Name); t != "" {
			return t, nil
		}
	case *ast.SelectorExpr:
		if x, ok := d.X.(*ast.Ident); ok && x.Name == recvName {
			if st, ok := p.types[recvType].(*ast.StructType); ok {
				for _, f := range st.Fields.List {
					for _, n := range f.Names {
						if n.Name == d.Sel.Name {
							return typeName(f.Type), nil
						}
					}
				}
			}
		}
	}
	return "", fmt.Errorf("cannot tell the type of DecodeConfig's destination (%T)", dst)
}

// localType finds the type a local variable is declared with: x := new(T), x := &T{}, x := T{} or var x T.
func localType(body *ast.BlockStmt, name string) string {
	var found string
	ast.Inspect(body, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			for i, lhs := range s.Lhs {
				if id, ok := lhs.(*ast.Ident); ok && id.Name == name && i < len(s.Rhs) && found == "" {
					found = constructed(s.Rhs[i])
				}
			}
		case *ast.ValueSpec:
			for _, id := range s.Names {
				if id.Name == name && s.Type != nil && found == "" {
					found = typeName(s.Type)
				}
			}
		}
		return found == ""
	})
	return found
}

func constructed(e ast.Expr) string {
	switch v := e.(type) {
	case *ast.CallExpr:
		if fn, ok := v.Fun.(*ast.Ident); ok && fn.Name == "new" && len(v.Args) == 1 {
			return typeName(v.Args[0])
		}
	case *ast.UnaryExpr:
		return constructed(v.X)
	case *ast.CompositeLit:
		return typeName(v.Type)
	}
	return ""
}

// typeName is the name of a same-package type expression (T or *T), "" for anything else.
func typeName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// keysOf returns the mapstructure keys of struct type name as mapstructure v1.5.0 sees them: the tag's name,
// or the Go field name when the tag has none (matched case-insensitively); "-" and unexported fields are
// skipped; ",squash" folds an embedded struct's keys in. ",remain" would make every key used, which the stand-in
// does not model, so it is an error here rather than a silently wrong table.
func (p *srcPackage) keysOf(name string, depth int) (Keys, error) {
	st, ok := p.types[name].(*ast.StructType)
	if !ok || depth > 4 {
		return nil, fmt.Errorf("config type %q is not a struct of this package", name)
	}
	keys := Keys{}
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			raw, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(raw).Get("mapstructure")
		}
		tagName, opts, _ := strings.Cut(tag, ",")
		optList := strings.Split(opts, ",")
		if slices.Contains(optList, "remain") {
			return nil, fmt.Errorf("%s has a ,remain field", name)
		}
		fieldNames := f.Names
		if len(fieldNames) == 0 { // embedded: mapstructure names it by its type
			if slices.Contains(optList, "squash") {
				inner, err := p.keysOf(typeName(f.Type), depth+1)
				if err != nil {
					return nil, fmt.Errorf("%s: squashed %w", name, err)
				}
				for k, v := range inner {
					keys[k] = v
				}
				continue
			}
			fieldNames = []*ast.Ident{ast.NewIdent(typeName(f.Type))}
		}
		for _, id := range fieldNames {
			if !ast.IsExported(id.Name) || tagName == "-" {
				continue
			}
			key := tagName
			if key == "" {
				key = id.Name
			}
			keys[key] = p.kindOf(f.Type, 0)
		}
	}
	return keys, nil
}

// kindOf classifies a field type by what JSON value mapstructure accepts for it. Types of other packages (other
// than time.Duration) are not parsed, so they are Any: the stand-in accepts every value for them.
func (p *srcPackage) kindOf(e ast.Expr, depth int) Kind {
	switch t := e.(type) {
	case *ast.StarExpr:
		return p.kindOf(t.X, depth)
	case *ast.Ident:
		switch t.Name {
		case "string":
			return String
		case "bool":
			return Bool
		case "int", "int8", "int16", "int32", "int64":
			return Int
		case "uint", "uint8", "uint16", "uint32", "uint64":
			return Uint
		case "float32", "float64":
			return Float
		}
		if def, ok := p.types[t.Name]; ok && depth < 4 {
			return p.kindOf(def, depth+1)
		}
	case *ast.SelectorExpr:
		if x, ok := t.X.(*ast.Ident); ok && x.Name == "time" && t.Sel.Name == "Duration" {
			return Duration
		}
	case *ast.ArrayType:
		if t.Len == nil && p.kindOf(t.Elt, depth) == String {
			return StringList
		}
		return List
	case *ast.MapType, *ast.StructType:
		return Object
	}
	return Any
}
