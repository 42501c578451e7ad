// A Worker importing the package by name: wrangler picks the `workerd`
// condition (the .wasm imported as a module), workerd runs it.
import { Snowflake } from 'edgeleaf';

export default {
  async fetch() {
    const s = new Snowflake({ workerId: 20 });
    return Response.json([...s.nextIds(2), await s.next()].map(String));
  },
};
