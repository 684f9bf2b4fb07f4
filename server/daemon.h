// Contract: the daemon's lifetime, called once from the CLI on the main thread: blocks SIGTERM/SIGINT/SIGHUP
// (so that only the main thread receives them), reads the API keys (an unreadable key file or half a TLS
// configuration: returns 1), starts the HTTP server with the routes of the chosen ApiMode behind the key
// gate, loads the model on a background thread (health answers "loading model" meanwhile), tells systemd
// READY=1 once loaded, and on SIGTERM/SIGINT tells systemd STOPPING=1, stops accepting work (new generations
// get 503 while in-flight ones drain), lets in-flight generations finish within the grace period (cancelling
// the rest, whose streams still end with their final line), closes the listener and returns 0. SIGHUP
// re-reads the key file (open streams carry on; a broken file keeps the old keys). Returns 1 when the address
// cannot be bound or the model cannot be loaded.
#pragma once

#include "server/options.h"

namespace kvtrie::server {

int run_daemon(const ServeOptions& options);

}  // namespace kvtrie::server
