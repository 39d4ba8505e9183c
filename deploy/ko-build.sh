#!/usr/bin/env bash
# Builds Holdfast's container image with ko (.ko.yaml) into an OCI tarball, with no
# container daemon and no registry: ko runs through the Go module proxy, and its base
# image is an empty one written into ko's cache (KOCACHE) and named by digest, so ko never
# pulls it. This is what .ci/run exercises on a machine without network; a real build
# uses .ko.yaml's distroless base (publish with `ko build ./cmd/holdfast`).
#   deploy/ko-build.sh [OUT.tar]
set -euo pipefail
out=${1:-holdfast-image.tar}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
img=$work/img
mkdir -p "$img/blobs/sha256"
config='{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]},"config":{}}'
cdig=$(printf %s "$config" | sha256sum | cut -d' ' -f1)
printf %s "$config" > "$img/blobs/sha256/$cdig"
manifest='{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:'$cdig'","size":'${#config}'},"layers":[]}'
mdig=$(printf %s "$manifest" | sha256sum | cut -d' ' -f1)
printf %s "$manifest" > "$img/blobs/sha256/$mdig"
printf %s '{"imageLayoutVersion":"1.0.0"}' > "$img/oci-layout"
printf %s '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:'$mdig'","size":'${#manifest}'}]}' > "$img/index.json"
KOCACHE=$work KO_DOCKER_REPO=registry.invalid/holdfast KO_DEFAULTBASEIMAGE=registry.invalid/empty@sha256:$mdig \
  go run github.com/google/ko@v0.19.1 build --push=false --platform linux/amd64 --tarball "$out" ./cmd/holdfast
# The image holds the static binary where ko's entrypoint runs it.
check=$(mktemp -d)
tar -xf "$out" -C "$check"
found=no
for layer in "$check"/*.tar.gz; do
  if tar -tzf "$layer" 2>/dev/null | grep -q 'ko-app/holdfast$'; then found=yes; fi
done
rm -rf "$check"
[ "$found" = yes ] || { echo "ko-build: the image has no /ko-app/holdfast" >&2; exit 1; }
echo "ko-build: $out holds /ko-app/holdfast"
