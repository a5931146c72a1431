package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
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
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(m.Kustomization.Resources, b) {
			return nil, fmt.Errorf("%s is not listed in %s/kustomization.yaml", b, dir)
		}
	}
	for _, r := range m.Kustomization.Resources {
		if err := m.loadResource(filepath.Join(dir, r)); err != nil {
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
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read manifest: %w", err)
	}
	for i, doc := range splitDocuments(b) {
		var tm typeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 Namespace":
			m.Namespace = new(corev1.Namespace)
			obj = m.Namespace
		case "v1 ConfigMap":
			m.ConfigMap = new(corev1.ConfigMap)
			obj = m.ConfigMap
		case "v1 Service":
			s := new(corev1.Service)
			m.Services = append(m.Services, s)
			obj = s
		case "apps/v1 StatefulSet":
			m.StatefulSet = new(appsv1.StatefulSet)
			obj = m.StatefulSet
		case "policy/v1 PodDisruptionBudget":
			m.PDB = new(policyv1.PodDisruptionBudget)
			obj = m.PDB
		case "batch/v1 Job":
			m.Job = new(batchv1.Job)
			obj = m.Job
		case "monitoring.coreos.com/v1 ServiceMonitor":
			m.ServiceMonitor = new(monitoringv1.ServiceMonitor)
			obj = m.ServiceMonitor
		default:
			return fmt.Errorf("%s: document %d: unknown kind %q of %q", path, i, tm.Kind, tm.APIVersion)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return fmt.Errorf("%s: document %d (%s): %w", path, i, tm.Kind, err)
		}
		m.Objects = append(m.Objects, obj)
	}
	return nil
}

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
