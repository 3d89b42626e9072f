# What the values imply, checked against the catalog. No provider resources: the tests evaluate all of it
# with Terraform alone.
locals {
  v = var.values

  # Evaluated at plan time of the create; the cluster modules' ignore_changes keep the first value, so
  # re-applies neither move the expiry nor touch running nodes.
  # UTC as YYYYMMDDhhmmss: digits only, so no label-value rule can refuse it, and fixed width compares as text.
  labels = merge(local.v.labels, {
    "pav-run-id"     = local.v.run_id
    "pav-expires-at" = formatdate("YYYYMMDDhhmmss", timeadd(plantimestamp(), "${local.v.max_lifetime_hours}h"))
  })

  region    = lookup(module.catalog.regions, local.v.region, null)
  platforms = try(local.region.platforms, {})
  platform  = lookup(local.platforms, local.v.platform, null)
  gpus      = try(local.platform.presets[local.v.preset].gpus, 0)
  # The region and platform that carry the fabric (the chosen ones when the catalog does not know it).
  fabric_home = lookup(module.catalog.fabrics, local.v.infiniband_fabric, { region = local.v.region, platform = local.v.platform })
  disk_step   = lookup(module.catalog.disk_size_steps_gib, local.v.boot_disk_type, 0)
  fabrics     = try(length(local.platform.fabrics), 0) > 0 ? join(", ", local.platform.fabrics) : "none listed in the catalog"

  # Only 8-GPU presets have InfiniBand HCAs; the rest talk NCCL over sockets. A node joins a GPU cluster
  # only when it is created, so a one-node run with a fabric still gets one: growing it adds nodes.
  with_cluster = local.gpus == 8 && local.v.infiniband_fabric != ""
  fabric       = local.gpus == 8 ? "infiniband" : "socket"

  # mk8s nodes need no address of their own (the driver talks to the API); VMs are reached over SSH.
  public_ip = coalesce(local.v.public_ip, var.kind == "vm")
}

module "catalog" {
  source = "../nebius-catalog"
}

# Checks that read the catalog or several values: preconditions fail the plan before anything is made.
# Each one stands aside when an earlier one already failed, so a bad value gives one line.
resource "terraform_data" "input_checks" {
  lifecycle {
    precondition {
      condition     = local.region != null
      error_message = "region ${local.v.region} is not in the catalog (${join(", ", keys(module.catalog.regions))}): add it to terraform/modules/nebius-catalog."
    }
    precondition {
      condition     = local.region == null || local.platform != null
      error_message = "platform ${local.v.platform} is not offered in ${local.v.region}; there: ${join(", ", keys(local.platforms))}."
    }
    precondition {
      condition     = local.platform == null || local.gpus > 0
      error_message = "preset ${local.v.preset} is not offered on ${local.v.platform}; it takes ${join(" or ", keys(try(local.platform.presets, {})))}."
    }
    precondition {
      condition     = local.gpus != 8 || local.v.node_count == 1 || local.v.infiniband_fabric != ""
      error_message = "infiniband_fabric is required for more than one 8-GPU node: set it to a fabric your GPU quota is on (known here: ${local.fabrics})."
    }
    precondition {
      condition     = !local.with_cluster || (local.fabric_home.region == local.v.region && local.fabric_home.platform == local.v.platform)
      error_message = "infiniband_fabric ${local.v.infiniband_fabric} is a ${local.fabric_home.platform} fabric of ${local.fabric_home.region}, not of ${local.v.platform} in ${local.v.region} (known there: ${local.fabrics})."
    }
    precondition {
      condition     = local.disk_step > 0 && local.v.boot_disk_size_gib % max(local.disk_step, 1) == 0
      error_message = local.disk_step == 0 ? "boot_disk_type ${local.v.boot_disk_type} is not a disk type: ${join(", ", keys(module.catalog.disk_size_steps_gib))}." : "boot_disk_size_gib must be a multiple of ${local.disk_step} for ${local.v.boot_disk_type} disks (e.g. ${2 * local.disk_step} or ${3 * local.disk_step}), or pick another boot_disk_type."
    }
    precondition {
      condition     = contains(module.catalog.filesystem_types, local.v.shared_filesystem_type)
      error_message = "shared_filesystem_type must be ${join(" or ", module.catalog.filesystem_types)}."
    }
  }
}
