# ruby dump.rb VAGRANTFILE — evaluate a Vagrantfile against a stand-in for
# Vagrant's configuration objects and print, as JSON, what `vagrant up`
# would do per machine: its private-network IPs, synced folders and
# provisioners, in order (global ones first, as Vagrant runs them).
# vagrant/*_test.go reads it; anything else the file sets (box, provider
# settings) is accepted and ignored.
require "json"

# Recorder for settings nobody reads: any call or assignment works.
class Ignored
  def method_missing(*) = self
  def respond_to_missing?(*) = true
end

class VMConfig < Ignored
  attr_reader :networks, :synced, :provisioners, :machines

  def initialize
    @networks, @synced, @provisioners, @machines = [], [], [], []
  end

  def network(type, **opts) = @networks << { type: type, **opts }
  def synced_folder(src, dst, **opts) = @synced << { src: src, dst: dst, **opts }

  # provision NAME, type: TYPE, ... — or provision TYPE, ... (the name is the type).
  def provision(name, **opts)
    @provisioners << { name: name.to_s, type: (opts[:type] || name).to_s, **opts.except(:type) }
  end

  def define(name, **_opts)
    m = Config.new
    yield m if block_given?
    @machines << [name.to_s, m.vm]
  end
end

class Config < Ignored
  def vm = (@vm ||= VMConfig.new)
end

module Vagrant
  @configs = []
  class << self
    attr_reader :configs

    def configure(_version)
      c = Config.new
      yield c
      @configs << c
    end
  end
end

load ARGV.fetch(0)
out = Vagrant.configs.flat_map do |c|
  g = c.vm
  g.machines.map do |name, vm|
    { name: name, networks: g.networks + vm.networks, synced: g.synced + vm.synced,
      provisioners: g.provisioners + vm.provisioners }
  end
end
puts JSON.generate(out)
