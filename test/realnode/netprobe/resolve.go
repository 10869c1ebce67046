package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"time"
)

// resolveHandler serves /resolve?name=…: the addresses the pod's resolver (its /etc/resolv.conf: the cluster's
// nameserver and search path) finds for name, as a JSON list, or 502 with the error.
func resolveHandler(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if name == "" {
		http.Error(w, "name is required", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	_ = json.NewEncoder(w).Encode(addrs)
}
