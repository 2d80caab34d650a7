#!/bin/sh
# Installs @modelcontextprotocol/server-everything (npm) into DIR for tests/integration/test_mcp_real.py, with npm's
# cache under DIR too: never in the operator's HOME. Then: TEST_MCP_NPM_PREFIX=DIR pytest ...
set -eu
dir=${1:?usage: install_everything.sh DIR}
mkdir -p "$dir/.npm-cache" "$dir/.home"
HOME="$dir/.home" npm_config_cache="$dir/.npm-cache" \
  npm install --prefix "$dir" --no-audit --no-fund --no-save @modelcontextprotocol/server-everything@2026.8.31
