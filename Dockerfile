# zkqueue: workers, Flower, the metrics exporter and the demo, from one image.
# GPU workers need the NVIDIA container runtime and CuPy: build with --build-arg GPU=1.
FROM python:3.11-slim-bookworm

ARG GPU=0
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends g++ \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/zkqueue
COPY pyproject.toml README.md ./
COPY groth16 groth16
COPY coordinator coordinator
COPY tasks tasks
COPY workers workers
RUN pip install --no-cache-dir . \
 && if [ "$GPU" = "1" ]; then pip install --no-cache-dir '.[gpu]' cupy-cuda12x; fi \
 # compile the native CPU kernels into the image, not at the first partition
 && python -c 'from groth16 import native; native.library_path()'

ENV ZKQUEUE_STORE_URL=/var/lib/zkqueue/store
VOLUME /var/lib/zkqueue/store
ENTRYPOINT ["zkqueue"]
CMD ["--help"]
