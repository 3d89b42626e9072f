variable "kind" {
  description = "The cluster module calling: vm or mk8s (nebius-spec's defaults differ by kind)."
  type        = string
}

variable "values" {
  description = "The env's, the user's and the driver's values; nebius-spec types, defaults and checks every key."
  type        = any
}
