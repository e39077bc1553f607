"""KServe v2 over gRPC (`inference.GRPCInferenceService`) plus `grpc.health.v1.Health`."""
