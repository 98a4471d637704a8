"""The typed classes of the dsh plugin protocol, generated from
sdk/proto/pluginv1/plugin.proto and events.proto by
sdk/proto/pluginv1/generate.sh. Do not edit the *_pb2.py files by hand."""
