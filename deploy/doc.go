// Package deploy reads kvring's deployment files (kubernetes/, the container build, grafana/, prometheus/)
// for the tests that prove them: every manifest decodes strictly into the Kubernetes API types, the
// container's arguments and environment parse with the real `kvring serve` flags (cmd/kvring's tests), and
// every metric a dashboard panel or an alert names is one a running node exports. The kvring binary does
// not import it.
package deploy
