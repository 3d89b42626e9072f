# A shared filesystem for every node: the user's (shared_filesystem_id: data outlives the run), or a new
# one of shared_filesystem_size_gib destroyed with the cluster, or none.
locals {
  create_filesystem = local.v.shared_filesystem_id == "" && local.v.shared_filesystem_size_gib > 0
  # From the values alone, so the plan knows it before the filesystem exists.
  filesystem_tag = local.create_filesystem || local.v.shared_filesystem_id != "" ? "pav-shared" : ""
}

resource "nebius_compute_v1_filesystem" "this" {
  count          = local.create_filesystem ? 1 : 0
  parent_id      = local.v.parent_id
  name           = "${local.v.name_prefix}-shared"
  type           = local.v.shared_filesystem_type
  size_gibibytes = local.v.shared_filesystem_size_gib
  labels         = module.spec.labels

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}
