# syntax=docker/dockerfile:1
# The one-shot job of compose.yaml that turns etcd's authentication on: the
# etcd image has no shell, so its etcdctl is copied into a Debian image.
FROM gcr.io/etcd-development/etcd:v3.5.21 AS etcd

FROM debian:bookworm-slim
COPY --from=etcd /usr/local/bin/etcdctl /usr/local/bin/etcdctl
USER 65532:65532
ENTRYPOINT ["/bin/sh", "-ec"]
