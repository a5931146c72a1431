package deploy

import (
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestDiskVariantClaimsALocalVolumePerPod: kubernetes/disk is the base with
// one local persistent volume claimed per pod (a volumeClaimTemplate of the
// variant's StorageClass: no provisioner, bound once the pod is scheduled,
// kept when the claim goes), mounted where the disk tier's directory is, and
// a disk limit below the claim's size; everything else is the base's.
func TestDiskVariantClaimsALocalVolumePerPod(t *testing.T) {
	t.Parallel()
	base, err := Load("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load("kubernetes/disk")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Objects) != len(base.Objects)+1 || m.StorageClass == nil || m.ConfigMap == nil || m.PDB == nil {
		t.Fatalf("the variant has %d objects, want the base's %d and a StorageClass", len(m.Objects), len(base.Objects))
	}
	sc := m.StorageClass
	if sc.Provisioner != "kubernetes.io/no-provisioner" || sc.VolumeBindingMode == nil ||
		*sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer || sc.ReclaimPolicy == nil || *sc.ReclaimPolicy != "Retain" {
		t.Errorf("StorageClass %+v: want local volumes bound when the pod is scheduled, and retained", sc)
	}
	vcts := m.StatefulSet.Spec.VolumeClaimTemplates
	if len(vcts) != 1 || vcts[0].Spec.StorageClassName == nil || *vcts[0].Spec.StorageClassName != sc.Name {
		t.Fatalf("volumeClaimTemplates %+v: want one claim of StorageClass %s", vcts, sc.Name)
	}
	claim := vcts[0]
	c, err := Container(&m.StatefulSet.Spec.Template.Spec, "kvring")
	if err != nil {
		t.Fatal(err)
	}
	env, err := ExpandEnv(c, map[string]string{"metadata.name": "kvring-0", "status.podIP": "10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	mount := ""
	for _, vm := range c.VolumeMounts {
		if vm.Name == claim.Name {
			mount = vm.MountPath
		}
	}
	if mount == "" || !strings.HasPrefix(vals["KVRING_DISK_DIR"], mount+"/") {
		t.Errorf("KVRING_DISK_DIR %q is not on the claim's mount %q", vals["KVRING_DISK_DIR"], mount)
	}
	limit := resource.MustParse(strings.TrimSuffix(vals["KVRING_DISK_LIMIT"], "B"))
	size := claim.Spec.Resources.Requests.Storage()
	if limit.Cmp(*size) >= 0 || float64(limit.Value()) > 0.95*float64(size.Value()) {
		t.Errorf("KVRING_DISK_LIMIT %s: want at most 95 %% of the claim's %s (region files are preallocated)", limit.String(), size)
	}
	bc, _ := Container(&base.StatefulSet.Spec.Template.Spec, "kvring")
	if len(c.Env) != len(bc.Env)+2 || len(c.VolumeMounts) != len(bc.VolumeMounts)+1 || c.Image != bc.Image {
		t.Errorf("the patch changed more than the disk tier's env and mount")
	}
}
