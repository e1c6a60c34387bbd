"""Run real vLLM 0.26.0 get_kv_cache_configs on planning-case inputs (kvpure JSON shape)."""
import copy, dataclasses, json, sys, types, enum
import torch
from vllm.v1 import kv_cache_interface as kvi
from vllm.v1.core import kv_cache_utils as ku
from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum

def ns(**kw): return types.SimpleNamespace(**kw)

class Spec:
    def __init__(self, d): self.method=d.get('method'); self.num_speculative_tokens=d.get('num_speculative_tokens')
    def use_eagle(self): return self.method in ('eagle','eagle3','mtp')

class Cfg:
    def __init__(self, c):
        cc=c['cache_config']; pc=c['parallel_config']; sc=c['scheduler_config']; mc=c['model_config']
        self.cache_config=ns(**cc)
        self.parallel_config=ns(**pc)
        self.scheduler_config=ns(**sc)
        self.model_config=ns(**mc)
        kt=c.get('kv_transfer_config')
        self.kv_transfer_config=None if kt is None else ns(kv_connector_extra_config=kt.get('kv_connector_extra_config') or {})
        sp=c.get('speculative_config')
        self.speculative_config=None if sp is None else Spec(sp)
        self.use_v2_model_runner=c.get('use_v2_model_runner', False)
    @property
    def max_concurrent_batches(self):
        pp=self.parallel_config.pipeline_parallel_size
        if self.scheduler_config.async_scheduling:
            if self.use_v2_model_runner: return pp+1
            if pp<=1: return 2
        return pp
    @property
    def max_in_flight_tokens(self): return self.max_concurrent_batches*self.scheduler_config.max_num_batched_tokens

def tdtype(s): return getattr(torch, s)

def parse_spec(o):
    cls=getattr(kvi, o['type'])
    kw={}
    for k,v in o.items():
        if k in ('type','_derived'): continue
        if k=='dtype': v=tdtype(v)
        elif k=='dtypes': v=tuple(tdtype(x) for x in v)
        elif k=='shapes': v=tuple(tuple(x) for x in v)
        elif k=='kv_quant_mode': v=kvi.KVQuantMode[v]
        elif k=='mamba_type': v=MambaAttentionBackendEnum[v]
        elif k=='kv_cache_specs': v={n:parse_spec(s) for n,s in v.items()}
        kw[k]=v
    return cls(**kw)

def rv(v):
    if isinstance(v, torch.dtype): return str(v).removeprefix('torch.')
    if isinstance(v, enum.Enum): return v.name
    if isinstance(v, dict): return {k: render_spec(s) for k,s in v.items()}
    if isinstance(v, (tuple,list)): return [rv(x) for x in v]
    return v

def render_spec(s):
    out={'type': type(s).__name__}
    for f in dataclasses.fields(s): out[f.name]=rv(getattr(s,f.name))
    if isinstance(s, kvi.AttentionSpec):
        out['_derived']={'page_size_bytes': s.page_size_bytes,'real_page_size_bytes': s.real_page_size_bytes,'unpadded_page_size_bytes': s.unpadded_page_size_bytes,'storage_block_size': s.storage_block_size}
    else:
        out['_derived']={'page_size_bytes': s.page_size_bytes,'storage_block_size': s.storage_block_size}
    return out

def render_cfg(c):
    return {'num_blocks': c.num_blocks,
            'kv_cache_tensors':[{'size':t.size,'shared_by':list(t.shared_by),'offset':t.offset,'block_stride':t.block_stride} for t in c.kv_cache_tensors],
            'kv_cache_groups':[{'layer_names':list(g.layer_names),'kv_cache_spec':render_spec(g.kv_cache_spec),'is_eagle_group':g.is_eagle_group} for g in c.kv_cache_groups]}

def run(inp):
    cfg=Cfg(inp['vllm_config'])
    try:
        specs=[{n:parse_spec(s) for n,s in w.items()} for w in inp['kv_cache_specs']]
    except Exception as e:
        return {'construct_error': {'type': type(e).__name__, 'message': str(e)}}
    try:
        configs=ku.get_kv_cache_configs(cfg, specs, list(inp['available_memory']))
    except Exception as e:
        return {'error': {'type': type(e).__name__, 'message': str(e)}, 'final_max_model_len': cfg.model_config.max_model_len}
    per=[]
    for c in configs:
        d={}
        if c.kv_cache_groups:
            tok, conc = ku.get_kv_cache_capacity(cfg, c)
            d['kv_cache_capacity_tokens']=tok; d['max_concurrency']=conc
            d['group_max_memory_usage_bytes']=[g.kv_cache_spec.max_memory_usage_bytes(cfg) for g in c.kv_cache_groups]
            d['max_memory_usage_bytes_from_groups']=ku._max_memory_usage_bytes_from_groups(cfg, c.kv_cache_groups)
        try:
            d['resolve_kv_cache_block_sizes']=list(ku.resolve_kv_cache_block_sizes(c, cfg))
        except Exception as e:
            return {'error': {'type': type(e).__name__, 'message': str(e), 'where': 'resolve'}, 'final_max_model_len': cfg.model_config.max_model_len}
        per.append(d)
    sched=ku.generate_scheduler_kv_cache_config(configs)
    return {'output':[render_cfg(c) for c in configs],'final_max_model_len':cfg.model_config.max_model_len,
            'derived':{'scheduler_kv_cache_config':render_cfg(sched),'per_worker':per}}

if __name__=='__main__':
    cases=json.load(sys.stdin)
    res=[run(c) for c in cases]
    json.dump(res, open(sys.argv[1], "w"))
