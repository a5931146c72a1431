package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"
)

// Kustomization is the part of kustomize's Kustomization that kvring's files use; decoding is strict, so a
// field kvring's files start using must be added here first.
type Kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
	// Patches are strategic-merge patches of the resources' objects (found by kind and name), each a file of
	// the directory, applied in order as kustomize applies them.
	Patches []struct {
		Path string `json:"path"`
	} `json:"patches,omitempty"`
}

// Manifests are the objects of one kustomization directory, decoded strictly. Objects holds every one, in
// the order of the kustomization's resources; the typed fields point to the first of each kind.
type Manifests struct {
	Dir           string
	Kustomization Kustomization
	Objects       []any

	Namespace      *corev1.Namespace
	ConfigMap      *corev1.ConfigMap
	Services       []*corev1.Service
	StatefulSet    *appsv1.StatefulSet
	PDB            *policyv1.PodDisruptionBudget
	Job            *batchv1.Job
	ServiceMonitor *monitoringv1.ServiceMonitor
	StorageClass   *storagev1.StorageClass
}

// Service returns the Service called name, or nil.
func (m *Manifests) Service(name string) *corev1.Service {
	for _, s := range m.Services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Load reads the kustomization in dir and every resource it lists. A field the API type does not have, a
// kind this package does not know, a resource file missing from the list or a listed file missing from the
// directory is an error.
func Load(dir string) (*Manifests, error) {
	m := &Manifests{Dir: dir}
	if err := decodeFile(filepath.Join(dir, "kustomization.yaml"), &m.Kustomization); err != nil {
		return nil, err
	}
	if k := m.Kustomization; k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		return nil, fmt.Errorf("%s/kustomization.yaml: apiVersion %q kind %q", dir, k.APIVersion, k.Kind)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	listed := slices.Clone(m.Kustomization.Resources)
	for _, p := range m.Kustomization.Patches {
		listed = append(listed, p.Path)
	}
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(listed, b) {
			return nil, fmt.Errorf("%s is not listed in %s/kustomization.yaml", b, dir)
		}
	}
	for _, r := range m.Kustomization.Resources {
		if err := m.loadResource(filepath.Join(dir, r)); err != nil {
			return nil, err
		}
	}
	for _, p := range m.Kustomization.Patches {
		if err := m.applyPatches(filepath.Join(dir, p.Path)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// typeMeta is what every manifest starts with.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func (m *Manifests) loadResource(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() { // a base kustomization
		base, err := Load(path)
		if err != nil {
			return err
		}
		for _, obj := range base.Objects {
			m.add(obj)
		}
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read manifest: %w", err)
	}
	for i, doc := range splitDocuments(b) {
		var tm typeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		obj := newObject(tm.APIVersion, tm.Kind)
		if obj == nil {
			return fmt.Errorf("%s: document %d: unknown kind %q of %q", path, i, tm.Kind, tm.APIVersion)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return fmt.Errorf("%s: document %d (%s): %w", path, i, tm.Kind, err)
		}
		m.add(obj)
	}
	return nil
}

// newObject returns a new, empty object of the API type of apiVersion and kind, or nil for a kind this
// package does not know.
func newObject(apiVersion, kind string) any {
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		return new(corev1.Namespace)
	case "v1 ConfigMap":
		return new(corev1.ConfigMap)
	case "v1 Service":
		return new(corev1.Service)
	case "apps/v1 StatefulSet":
		return new(appsv1.StatefulSet)
	case "policy/v1 PodDisruptionBudget":
		return new(policyv1.PodDisruptionBudget)
	case "batch/v1 Job":
		return new(batchv1.Job)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return new(monitoringv1.ServiceMonitor)
	case "storage.k8s.io/v1 StorageClass":
		return new(storagev1.StorageClass)
	}
	return nil
}

// add appends obj to Objects and points the typed field of its kind at it.
func (m *Manifests) add(obj any) {
	switch o := obj.(type) {
	case *corev1.Namespace:
		m.Namespace = o
	case *corev1.ConfigMap:
		m.ConfigMap = o
	case *corev1.Service:
		m.Services = append(m.Services, o)
	case *appsv1.StatefulSet:
		m.StatefulSet = o
	case *policyv1.PodDisruptionBudget:
		m.PDB = o
	case *batchv1.Job:
		m.Job = o
	case *monitoringv1.ServiceMonitor:
		m.ServiceMonitor = o
	case *storagev1.StorageClass:
		m.StorageClass = o
	}
	m.Objects = append(m.Objects, obj)
}

// applyPatches applies each document of the file at path, a strategic-merge patch, to the object of its
// kind and name, in place, as kustomize's patches do; the result decodes strictly.
func (m *Manifests) applyPatches(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read patch: %w", err)
	}
	for i, doc := range splitDocuments(b) {
		var head struct {
			typeMeta `json:",inline"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		target := m.find(head.APIVersion, head.Kind, head.Metadata.Name)
		if target == nil {
			return fmt.Errorf("%s: document %d patches %s %q, which no resource defines", path, i, head.Kind, head.Metadata.Name)
		}
		if err := patchObject(target, doc); err != nil {
			return fmt.Errorf("%s: document %d (%s %s): %w", path, i, head.Kind, head.Metadata.Name, err)
		}
	}
	return nil
}

// find returns the object of apiVersion, kind and name, or nil.
func (m *Manifests) find(apiVersion, kind, name string) any {
	for _, obj := range m.Objects {
		b, err := json.Marshal(obj)
		if err != nil {
			continue
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if json.Unmarshal(b, &head) == nil && head.APIVersion == apiVersion && head.Kind == kind && head.Metadata.Name == name {
			return obj
		}
	}
	return nil
}

// patchObject applies the strategic-merge patch doc (YAML) to obj in place.
func patchObject(obj any, doc []byte) error {
	orig, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	patch, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	var o, p any
	if err := json.Unmarshal(orig, &o); err != nil {
		return err
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return err
	}
	merged, err := json.Marshal(mergePatch(o, p))
	if err != nil {
		return err
	}
	fresh := newObjectLike(obj)
	if err := yaml.UnmarshalStrict(merged, fresh); err != nil {
		return err
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
	return nil
}

// mergePatch merges patch into orig as a strategic-merge patch does for the fields kvring's patches use:
// maps merge key by key (a null value deletes the key), lists of objects that all have a "name" merge
// element by element by name (new names are appended), any other value is replaced.
func mergePatch(orig, patch any) any {
	switch p := patch.(type) {
	case map[string]any:
		o, ok := orig.(map[string]any)
		if !ok {
			o = map[string]any{}
		}
		for k, v := range p {
			if v == nil {
				delete(o, k)
				continue
			}
			o[k] = mergePatch(o[k], v)
		}
		return o
	case []any:
		o, ok := orig.([]any)
		if !ok || !namedList(o) || !namedList(p) {
			return p
		}
		for _, pe := range p {
			name := pe.(map[string]any)["name"]
			i := slices.IndexFunc(o, func(oe any) bool { return oe.(map[string]any)["name"] == name })
			if i < 0 {
				o = append(o, pe)
				continue
			}
			o[i] = mergePatch(o[i], pe)
		}
		return o
	}
	return patch
}

// namedList reports whether every element of l is an object with a string "name".
func namedList(l []any) bool {
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["name"].(string); !ok {
			return false
		}
	}
	return true
}

// newObjectLike returns a new, empty object of obj's type.
func newObjectLike(obj any) any { return reflect.New(reflect.TypeOf(obj).Elem()).Interface() }

// decodeFile decodes the YAML file at path into v, strictly.
func decodeFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read %s: %w", path, err)
	}
	if err := yaml.UnmarshalStrict(b, v); err != nil {
		return fmt.Errorf("cannot decode %s: %w", path, err)
	}
	return nil
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// splitDocuments splits a multi-document YAML file, dropping empty documents.
func splitDocuments(b []byte) [][]byte {
	var out [][]byte
	for _, d := range docSep.Split(string(b), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			out = append(out, []byte(d))
		}
	}
	return out
}

func stripComments(s string) string {
	var buf bytes.Buffer
	for l := range strings.Lines(s) {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			buf.WriteString(l)
		}
	}
	return buf.String()
}

// Container returns the pod template's container called name, or an error.
func Container(spec *corev1.PodSpec, name string) (*corev1.Container, error) {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i], nil
		}
	}
	return nil, fmt.Errorf("no container %q", name)
}

// ExpandEnv returns a container's environment as the kubelet sets it: values from the downward API come
// from fields (metadata.name → fields["metadata.name"]), and $(VAR) in a value is replaced by an earlier
// variable's value ($$ is a literal $; an unknown $(VAR) stays as written). Sources other than literal
// values and fieldRef are an error.
func ExpandEnv(c *corev1.Container, fields map[string]string) ([]string, error) {
	vals := make(map[string]string)
	var out []string
	for _, e := range c.Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = expandRefs(e.Value, vals)
		case e.ValueFrom.FieldRef != nil:
			f, ok := fields[e.ValueFrom.FieldRef.FieldPath]
			if !ok {
				return nil, fmt.Errorf("env %s: no value for field %q", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
			v = f
		default:
			return nil, fmt.Errorf("env %s: unsupported value source", e.Name)
		}
		vals[e.Name] = v
		out = append(out, e.Name+"="+v)
	}
	return out, nil
}

var envRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func expandRefs(s string, vals map[string]string) string {
	return envRef.ReplaceAllStringFunc(s, func(ref string) string {
		if ref == "$$" {
			return "$"
		}
		if v, ok := vals[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

// ErrNoConfig is returned by ServeConfig when the ConfigMap lacks the node configuration.
var ErrNoConfig = errors.New("deploy: the ConfigMap has no kvring.yaml")

// ServeConfig returns the node configuration file (kvring.yaml) of the ConfigMap.
func (m *Manifests) ServeConfig() (string, error) {
	if m.ConfigMap == nil {
		return "", ErrNoConfig
	}
	s, ok := m.ConfigMap.Data["kvring.yaml"]
	if !ok {
		return "", ErrNoConfig
	}
	return s, nil
}
