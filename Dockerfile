# The egress-proxies worker and API image (docker-compose.yml builds it for both services).
# Node runs the TypeScript sources directly (type stripping), so there is no build step. The bin/
# launchers turn on Node's compile cache, and the worker keeps its webpack-built workflow bundle
# (both under the node user's ~/.cache/egress-proxies; a volume there keeps them across restarts). No secret is baked in: the
# providers file, the SSH key, known_hosts and the API token file are mounted at run time.
FROM node:24-bookworm-slim

ENV NODE_ENV=production
WORKDIR /app

# Dependencies first (cached while only sources change). ssh2's optional native crypto builds
# with the toolchain below and is dropped with it afterwards. iproute2 stays: `health.via: auto`
# asks `ip route get` whether the worker routes to a guest (docs/health.md, "Probe path"); without
# it every probe goes through the host's SSH link. haproxy stays: bin/door runs it (docs/door.md).
COPY package.json package-lock.json ./
RUN apt-get update \
 && apt-get install -y --no-install-recommends iproute2 haproxy python3 make g++ \
 && npm ci --omit=dev --no-audit --no-fund \
 && apt-get purge -y python3 make g++ && apt-get autoremove -y \
 && rm -rf /var/lib/apt/lists/* /root/.npm

# What production runs and nothing else: the worker, the API, the door service and egressctl (workers/, started by
# bin/) and the folders they import (test/unit/compose.test.ts walks their imports to check). The
# dev stack (dev/) and scripts/ stay in the source checkout; `egressctl dev` says so in the image.
COPY tsconfig.json ./
COPY lib ./lib
COPY contracts ./contracts
COPY runtime ./runtime
COPY client ./client
COPY cli ./cli
COPY activities ./activities
COPY workflows ./workflows
COPY api ./api
COPY workers ./workers
COPY bin ./bin

USER node
ENTRYPOINT ["node"]
CMD ["bin/worker", "--help"]
