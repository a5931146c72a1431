"""Generated protobuf and gRPC code for kvring.v1 (proto/kvring/v1/*.proto).

Do not edit the ``*_pb2*.py`` files: ``make proto`` regenerates them and ``make verify-proto`` checks them.
"""
