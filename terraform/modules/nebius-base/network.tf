# The nodes' subnet: the user's (subnet_id), or a network and subnet made for this cluster and destroyed
# with it. Reusing one saves the network quota and lets the nodes sit beside existing services.
locals {
  create_subnet = local.v.subnet_id == ""
}

resource "nebius_vpc_v1_network" "this" {
  count     = local.create_subnet ? 1 : 0
  parent_id = local.v.parent_id
  name      = "${local.v.name_prefix}-net"
  labels    = module.spec.labels

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}

resource "nebius_vpc_v1_subnet" "this" {
  count      = local.create_subnet ? 1 : 0
  parent_id  = local.v.parent_id
  name       = "${local.v.name_prefix}-subnet"
  network_id = nebius_vpc_v1_network.this[0].id
  labels     = module.spec.labels

  ipv4_private_pools = {
    use_network_pools = true
  }

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}
