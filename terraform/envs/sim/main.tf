locals {
  script = var.sim_hosts_script != "" ? var.sim_hosts_script : abspath("${path.module}/../../../scripts/sim-hosts")
  names  = [for i in range(var.hosts) : "sim-${var.cluster_id}-${i}"]
}

# The bridge the hosts hang off; this machine reaches them through its address 10.77.K.1.
resource "terraform_data" "network" {
  input = {
    script       = local.script
    state_dir    = var.state_dir
    cluster_id   = var.cluster_id
    subnet_index = var.subnet_index
  }

  provisioner "local-exec" {
    command = "${self.input.script} net-up --state-dir '${self.input.state_dir}' --cluster ${self.input.cluster_id} --subnet-index ${self.input.subnet_index}"
  }

  provisioner "local-exec" {
    when    = destroy
    command = "${self.input.script} net-down --state-dir '${self.input.state_dir}'"
  }
}

# One resource per host, so a failed create destroys only what exists and a re-apply adds what is missing.
resource "terraform_data" "host" {
  count = var.hosts

  input = {
    script    = local.script
    state_dir = var.state_dir
    index     = count.index
    name      = local.names[count.index]
    pubkey    = var.ssh_public_key_file
  }

  provisioner "local-exec" {
    command = "${self.input.script} host-up --state-dir '${self.input.state_dir}' --index ${self.input.index} --name ${self.input.name} --pubkey '${self.input.pubkey}'"
  }

  provisioner "local-exec" {
    when    = destroy
    command = "${self.input.script} host-down --state-dir '${self.input.state_dir}' --index ${self.input.index}"
  }

  depends_on = [terraform_data.network]
}
