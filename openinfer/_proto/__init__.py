"""Generated protobuf and gRPC code.

The modules in this package are produced from the ``.proto`` files in
``openinfer/protos`` by ``openinfer/protos/generate.sh``; do not edit them
by hand.
"""
