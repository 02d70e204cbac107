// Validates every object of the Kubernetes manifests named on the command
// line against the API's OpenAPI schema, as kubernetes-models ships it
// (generated from the Kubernetes OpenAPI spec; ajv underneath), and a
// ServiceMonitor against the prometheus-operator CRD's schema, as
// @kubernetes-models/prometheus-operator ships it: types, required fields,
// enums and formats. Unknown fields pass, as in
// kubeconform without -strict; deploy_test.go checks the fields it reads.
//
// Input: JSON, one array of objects per file (deploy_test.go converts the
// YAML, so this script needs no YAML parser). Prints one line per object
// and exits 1 when any object is invalid.
import { readFileSync } from "node:fs";

// apiVersion -> the module path of its kinds: kubernetes-models' for the
// API's own groups, @kubernetes-models/prometheus-operator's (generated
// from the operator's CRDs) for a ServiceMonitor.
const groups = {
  v1: "kubernetes-models/v1",
  "apps/v1": "kubernetes-models/apps/v1",
  "policy/v1": "kubernetes-models/policy/v1",
  "networking.k8s.io/v1": "kubernetes-models/networking.k8s.io/v1",
  "monitoring.coreos.com/v1": "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1",
};
let bad = 0;
for (const file of process.argv.slice(2)) {
  for (const obj of JSON.parse(readFileSync(file, "utf8"))) {
    const where = `${obj.kind}/${obj.metadata?.name}`;
    const group = groups[obj.apiVersion];
    if (!group) {
      console.log(`${where}: apiVersion ${obj.apiVersion} has no schema here`);
      bad++;
      continue;
    }
    let mod;
    try {
      mod = await import(`${group}/${obj.kind}`);
    } catch (e) {
      console.log(`${where}: no schema for kind ${obj.kind} in ${obj.apiVersion}: ${e.message}`);
      bad++;
      continue;
    }
    try {
      new mod[obj.kind](obj).validate();
      console.log(`${where}: valid`);
    } catch (e) {
      console.log(`${where}: INVALID: ${e.message}`);
      bad++;
    }
  }
}
process.exit(bad ? 1 : 0);
