// Package grafana holds the tests of flashgate's Grafana dashboard (flashgate.json beside it): it is a dashboard
// Grafana can import (a title, a uid, panels in rows, each panel on the ${datasource} variable, each query an
// expression), and every metric its queries and variables name is one the binaries export, read from the
// /metrics of a running origin and edge, with the labels the queries match and group on. It has no code of its
// own.
package grafana
