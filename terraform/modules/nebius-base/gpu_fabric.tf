# The InfiniBand GPU cluster 8-GPU nodes join at creation (spec.with_cluster); none for other presets.
resource "nebius_compute_v1_gpu_cluster" "this" {
  count             = module.spec.with_cluster ? 1 : 0
  parent_id         = local.v.parent_id
  name              = "${local.v.name_prefix}-${local.v.infiniband_fabric}"
  infiniband_fabric = local.v.infiniband_fabric
  labels            = module.spec.labels

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}
