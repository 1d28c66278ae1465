#!/usr/bin/env node
// An MCP search server built with the official SDK (`Server` over stdio), for mcp_tool_test.mjs: its tool `web_search` (`queries`) asks a
// SearXNG-style endpoint for each query, as Quarry's searxng plugin does,
// interleaves the lists the same way and returns the results as
// structuredContent `{results: [{url, title, snippet, published?}]}`:
//
//   node mcp_search_server.mjs BASE_URL

import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const base = process.argv[2];
const server = new Server({ name: 'searxng-over-mcp', version: '0.0.0' }, { capabilities: { tools: {} } });

// The built-in web search's description and schema, word for word (so that
// the model is shown the same tool).
const web_search = {
  name: 'web_search',
  description: 'Search the web for information. Returns a list of search results with titles, metadata, and snippets.',
  inputSchema: {
    type: 'object',
    properties: {
      queries: {
        type: 'array', items: { type: 'string' },
        description: 'One or more queries to look up on the web. Must contain only printable characters',
      },
    },
    required: ['queries'],
  },
};

server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [web_search] }));

server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const queries = request.params.arguments.queries;
  const lists = [];
  for (const q of queries) {
    const res = await fetch(`${base}/search?q=${encodeURIComponent(q)}&format=json`);
    const body = await res.json();
    lists.push((body.results || []).map((r) => ({
      url: r.url, title: r.title || '', snippet: r.content || '',
      ...(r.publishedDate ? { published: r.publishedDate } : {}) })));
  }
  // Round-robin, (title, url) pairs once, at most 10 (the plugin's default).
  const results = [];
  const seen = new Set();
  for (let rank = 0; results.length < 10; ++rank) {
    let any = false;
    for (const list of lists) {
      if (rank >= list.length)
        continue;
      any = true;
      const key = `${list[rank].title}\u0000${list[rank].url}`;
      if (!seen.has(key) && results.length < 10) {
        seen.add(key);
        results.push(list[rank]);
      }
    }
    if (!any)
      break;
  }
  return { content: [{ type: 'text', text: JSON.stringify({ results }) }], structuredContent: { results } };
});

await server.connect(new StdioServerTransport());
